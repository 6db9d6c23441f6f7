"""Voicemail transcripts, offline: a recording's WAV file to its words and a confidence.

The words are a rough draft (docs/telephony.md, "Voicemail transcripts: accuracy", has the
measured word error rate) and Relay labels them "automatic transcript, may be inaccurate".
No Django, no settings: the caller names the engine (TRANSCRIBE_ENGINE) and gets it from
`engine_for`.

Engines. `ENGINES` maps an engine's name to a factory that takes no argument and returns an
object with `transcribe(wav: bytes) -> Transcript` (the `Engine` protocol), or to None for an
engine that transcribes nothing ("off"). `engine_for(name)` makes each engine once per process
and hands the same one to every caller, so it must be safe to call from several threads. An
operator with a better engine registers it before the worker starts, from a module of their
own (an `AppConfig.ready()`, for instance), and sets TRANSCRIBE_ENGINE to its name::

    from history.transcription import Transcript, TranscriptionError, register_engine

    class WhisperEngine:
        def transcribe(self, wav: bytes) -> Transcript:
            ...  # raise TranscriptionError for audio it cannot read
            return Transcript(text=text, confidence=round(confidence, 2))

    register_engine("whisper", WhisperEngine)

An engine never logs the words it heard (they are the caller's message).

The built-in engine is pocketsphinx (CMU's decoder; its wheel ships the US English model):
see `PocketsphinxEngine`.
"""

from __future__ import annotations

import io
import logging
import random
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)

MODEL_RATE = 16000  # the bundled en-us acoustic model hears 16 kHz
# A noise floor under the upsampled audio, in 16-bit sample units (standard deviation):
# about -50 dBFS. Telephone audio has nothing above 4 kHz, so the model's filters between
# 4 and 6.8 kHz would see a silence no speech it was trained on had; a floor of noise there
# brings them back to something it knows. Measured on the 10 sentences of
# tests/history/test_transcription_accuracy.py (139 words): WER 0.69 without it; at 100,
# 0.66 with this noise (seed 0) and 0.59 and 0.61 with two other seeds, so a noise's luck
# is worth about 0.04; 0.63 at 200, 0.64 at 30 and at 400.
NOISE_FLOOR = 100
# Decoder options, each measured on those sentences against the model's defaults (CPU per
# second of speech varies with the shared machine's load, from 0.3 to 0.5 s):
# - maxhmmpf=10000 (default 30000) caps the search's active HMMs: the same WER (one word
#   better), and a bound on the CPU a noisy message can take.
# Tried and left out (WER without the noise floor, 0.69 with the defaults): cmn=live (0.78),
# remove_noise=no (0.67, but only by rewriting the model's feat.params, whose values win
# over the decoder's arguments), upperf 3800 or 4000 to match the telephone band (0.96,
# 0.97: the model's features change under it), lw=9 (0.76), lw=4 (0.68, twice the CPU),
# wip=0.2 (0.71), wider beams (0.70, a third more CPU), dither (0.69); with the floor,
# fwdflat=no (0.67) and topn=2 (0.68) cost words for their CPU.
DECODER_OPTIONS = {"maxhmmpf": 10000, "loglevel": "ERROR"}


@dataclass(frozen=True)
class Transcript:
    text: str  # lower-case words; "" when nothing was heard
    confidence: float  # 0..1; 0.0 when nothing was heard


class TranscriptionError(Exception):
    """The audio cannot be read or decoded (not a WAV file, or a codec it cannot take)."""


class Engine(Protocol):
    def transcribe(self, wav: bytes) -> Transcript: ...


class PocketsphinxEngine:
    """pocketsphinx 5 with its bundled en-us model (acoustic model, CMU dictionary, trigram
    language model).

    The WAV file (any rate, channels or sample format FFmpeg's WAV reader takes; recordings
    are 8 kHz mono 16-bit PCM) is decoded and resampled to 16 kHz mono by PyAV (FFmpeg's
    libswresample, with a proper anti-imaging filter, at C speed; PyAV is already here for
    the browser phone). audioop would do the resampling too, but is deprecated and gone in
    Python 3.13, and numpy is no dependency of Relay's.

    The confidence is the mean of the words' posterior probabilities: pocketsphinx's third
    pass (bestpath) scores the word lattice, and each word of the best path (`seg()`) carries
    the probability that it is right given the lattice (silences and fillers left out).

    One decoder (about 90 MB, loaded in about 0.25 s) per engine, made on first use and
    used by one thread at a time under a lock: pocketsphinx holds the GIL while decoding,
    so more decoders in one process would cost memory and gain nothing. Run processes to
    transcribe in parallel.
    """

    def __init__(self, **options) -> None:
        self.options = {**DECODER_OPTIONS, **options}
        self._decoder = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now rather than on the first message (a worker's start-up)."""
        with self._lock:
            self._load()

    def _load(self):
        if self._decoder is None:
            from pocketsphinx import Decoder  # here: only a transcribing process loads it

            self._decoder = Decoder(**self.options)
        return self._decoder

    def transcribe(self, wav: bytes) -> Transcript:
        """`wav`'s words. TranscriptionError for audio that cannot be read; empty or silent
        audio gives Transcript("", 0.0)."""
        audio = pcm16k(wav)
        if not audio:
            return Transcript(text="", confidence=0.0)
        with self._lock:
            decoder = self._load()
            # A fresh feature extractor for each message: its noise estimate and cepstral
            # mean would otherwise carry over from the message before, and the same
            # recording could give other words depending on what the process heard last.
            decoder.reinit_feat()
            decoder.start_utt()
            decoder.process_raw(with_noise_floor(audio), full_utt=True)
            decoder.end_utt()
            hypothesis = decoder.hyp()
            posteriors = [segment.prob for segment in decoder.seg() if not _is_filler(segment.word)]
        text = hypothesis.hypstr.strip() if hypothesis is not None else ""
        if not text or not posteriors:
            return Transcript(text="", confidence=0.0)
        confidence = min(1.0, max(0.0, sum(posteriors) / len(posteriors)))
        return Transcript(text=text, confidence=round(confidence, 2))


def _is_filler(word: str) -> bool:
    """<s>, </s>, <sil> and the noise words ([NOISE], ++...++): not words anyone said."""
    return word.startswith(("<", "[", "+"))


def pcm16k(wav: bytes) -> bytes:
    """`wav` as 16-bit mono PCM at 16 kHz (little-endian), b"" for no audio;
    TranscriptionError when FFmpeg's WAV reader cannot read it."""
    # PyAV here, not at the module's top: every process that imports the history's services
    # imports this module (through history.tasks), and only a transcribing one needs FFmpeg.
    import av

    resampler = av.AudioResampler(format="s16", layout="mono", rate=MODEL_RATE)
    chunks = []
    try:
        with av.open(io.BytesIO(wav), format="wav") as container:
            if not container.streams.audio:
                raise TranscriptionError("no audio stream")
            for frame in container.decode(audio=0):
                chunks += [_samples(out) for out in resampler.resample(frame)]
        chunks += [_samples(out) for out in resampler.resample(None)]  # what it holds back
    except av.error.FFmpegError as exc:
        raise TranscriptionError(f"unreadable audio: {type(exc).__name__}") from exc
    except ValueError as exc:  # e.g. a format the resampler cannot take
        raise TranscriptionError(f"unreadable audio: {exc}") from exc
    return b"".join(chunks)


def _samples(frame) -> bytes:
    return bytes(frame.planes[0])[: frame.samples * 2]  # a plane may be padded


# One second of it, repeated. S311: noise, not a secret.
_NOISE = random.Random(0)  # noqa: S311
_FLOOR = array("h", (round(_NOISE.gauss(0, NOISE_FLOOR)) for _ in range(MODEL_RATE)))


def with_noise_floor(pcm: bytes) -> bytes:
    """16-bit PCM with NOISE_FLOOR's noise added (the same noise every time, so a message
    always gives the same words), clipped to 16 bits."""
    samples = array("h", pcm)
    floor, size = _FLOOR, len(_FLOOR)
    return array(
        "h",
        [min(32767, max(-32768, s + floor[i % size])) for i, s in enumerate(samples)],
    ).tobytes()


ENGINES: dict[str, Callable[[], Engine] | None] = {
    "pocketsphinx": PocketsphinxEngine,
    "off": None,  # no transcripts
}
_made: dict[str, Engine] = {}
_made_lock = threading.Lock()


def register_engine(name: str, factory: Callable[[], Engine]) -> None:
    """Make `name` a value of TRANSCRIBE_ENGINE: `factory()` makes the engine (once per
    process, on the first `engine_for(name)`). Replaces an engine of the same name."""
    with _made_lock:
        ENGINES[name] = factory
        _made.pop(name, None)


def engine_for(name: str) -> Engine | None:
    """The engine called `name`, the same one for the whole process; None for "off".
    ValueError for a name no engine was registered under."""
    if name not in ENGINES:
        raise ValueError(f"unknown transcription engine {name!r}; known: {', '.join(ENGINES)}")
    factory = ENGINES[name]
    if factory is None:
        return None
    with _made_lock:
        if name not in _made:
            _made[name] = factory()
        return _made[name]
