"""A speech gather's listening: the caller's audio through the voice detector
(telephony.vad) until the utterance ends, then its words from the transcription engine
(history.transcription, TRANSCRIBE_ENGINE, the voicemail's).

The engine runs in child processes of the agent (up to SPEECH_GATHER_PROCESSES, the first
started when the first speech gather begins, another when utterances end together: spawn,
not fork, since the agent has threads), never on the event loop nor in its thread: an engine
holds the GIL for as long as it decodes. `warm` starts the child and loads
the model as a gather begins, while its prompt plays and the caller speaks, so the first
utterance does not pay for them. Each transcription is bounded by TRANSCRIBE_TIMEOUT
seconds; a failure, a timeout or the engine "off" is no speech ("", confidence 0), and the
call goes on. The engine is history.tasks.transcription_engine's, the voicemail's
(TRANSCRIBE_MODEL_DIR included). The words never reach a log.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import django
from django.conf import settings

from history.tasks import transcription_engine
from history.transcription import ENGINES, Transcript
from telephony.sip.rtp import wav_from_pcm

logger = logging.getLogger(__name__)

TRANSCRIBE_TIMEOUT = 10.0  # seconds for an utterance of at most 30 s
NOTHING = Transcript(text="", confidence=0.0)

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _the_pool() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=settings.SPEECH_GATHER_PROCESSES,
                mp_context=get_context("spawn"),
                initializer=django.setup,
            )
        return _pool


def _pool_drop(pool: ProcessPoolExecutor) -> None:
    """Give up a pool whose child failed or hangs: the next utterance gets a new one."""
    global _pool
    with _pool_lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


def _transcribe_in_child(name: str, wav: bytes, hints: str | None) -> Transcript:
    return transcription_engine(name).transcribe(wav, hints=hints)


def _load_in_child(name: str) -> None:
    engine = transcription_engine(name)
    if hasattr(engine, "load"):
        engine.load()


def warm(engine: str) -> None:
    """Start the child and load `engine`'s model in it now, without waiting (a speech gather
    begins): the utterance's transcription queues behind it in the child. A failure here
    is the transcription's to meet and report."""
    if ENGINES.get(engine) is None:
        return
    _the_pool().submit(_load_in_child, engine).add_done_callback(_loaded)


def _loaded(future) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("speech engine not loaded: %s", type(future.exception()).__name__)


async def transcribe(pcm: bytes, *, engine: str, hints: list[str], label: str) -> Transcript:
    """The words of `pcm` (an utterance) by `engine`; NOTHING when there are none or the
    engine failed, is off or took longer than TRANSCRIBE_TIMEOUT."""
    if not pcm or ENGINES.get(engine) is None:
        return NOTHING
    pool = _the_pool()
    loop = asyncio.get_running_loop()
    try:
        future = loop.run_in_executor(
            pool, _transcribe_in_child, engine, wav_from_pcm(pcm), ", ".join(hints) or None
        )
        return await asyncio.wait_for(future, TRANSCRIBE_TIMEOUT)
    except TimeoutError:
        logger.warning("%s: speech not transcribed within %g s", label, TRANSCRIBE_TIMEOUT)
        _pool_drop(pool)
    except Exception as exc:  # the engine's failure is this utterance's, not the call's
        logger.warning("%s: speech not transcribed: %s", label, type(exc).__name__)
        if isinstance(exc, RuntimeError):  # a broken pool (its child died)
            _pool_drop(pool)
    return NOTHING
