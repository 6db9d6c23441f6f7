"""The history's side of the worker: a call's recording transcribed (history.transcription),
a voicemail or what a `record` verb kept, its transcript stored on the recording
(calls.Recording) and announced: a voicemail's as `call_record.transcribed` with its mail
(here), a `record` verb's as its call's `transcribed` event (realtime.pipeline), each by the
function TRANSCRIPT_ANNOUNCED names for its kind.

A transcription runs on the `transcribe` queue, which relay_worker serves from threads of its
own (TRANSCRIBE_CONCURRENCY of them), never from the thread that dispatches calls, and never
in a telephony agent. Across every worker at most TRANSCRIBE_CONCURRENCY run at once: each
holds one of that many TranscriptionSlot rows, taken with a conditional UPDATE under a lease.
The recording is held under a lease too; a worker that dies mid-way leaves it to expire, and
the sweep (a periodic pass of the worker) queues it again, TRANSCRIBE_ATTEMPTS times in all
before it is `failed`. Neither the transcript nor anything heard is ever logged.
"""

from __future__ import annotations

import io
import logging
import threading
import time
import wave
from array import array
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import timedelta
from multiprocessing import get_context

import django
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks import task

from calls.models import Call, Recording, RecordingKind
from calls.services import Report, call_reports_add
from core import events, taskqueue
from core.recordings import recordings_storage
from history import notifications
from history.models import TranscriptionSlot, TranscriptStatus
from history.records import record_by_id, record_frame
from history.transcription import Engine, Transcript, engine_for
from virtual_numbers.selectors import number_members_heard

logger = logging.getLogger(__name__)

QUEUE = "transcribe"
TRANSCRIBE_ATTEMPTS = 3  # started transcriptions of one message, a worker's death included
SLOT_BUSY_RETRY = timedelta(seconds=2)
TRANSCRIBED = "call_record.transcribed"
NOTHING = Transcript(text="", confidence=0.0)


@task(queue_name=QUEUE)
def transcribe_recording(recording_id: str) -> None:
    """`recording_id`: the calls.Recording to transcribe, a voicemail or a `record` verb's."""
    transcription_run(recording_id=recording_id)


@task(queue_name=QUEUE)
def transcribe_message(record_id: str) -> None:
    """The voicemail of the call `record_id`: what a Relay before record-verb transcripts
    queued, still found in an upgraded queue (new ones are transcribe_recording's)."""
    recording = Recording.objects.filter(call_id=record_id, kind=RecordingKind.VOICEMAIL)
    for recording_id in recording.values_list("id", flat=True):
        transcription_run(recording_id=recording_id)


def schedule_transcription(recording_id, *, after: timedelta | None = None) -> None:
    """Queue the transcription of the recording, in the caller's transaction."""
    due = transcribe_recording
    if after is not None:
        due = due.using(run_after=timezone.now() + after)
    taskqueue.enqueue(due, recording_id=str(recording_id))


def transcript_status_for(*, recording: str, seconds: float | None) -> str | None:
    """The status a new record's message starts with: pending when it is to be transcribed,
    off when the engine is off or the message is longer than TRANSCRIBE_MAX_SECONDS, and
    None without a message."""
    if not recording:
        return None
    if settings.TRANSCRIBE_ENGINE == "off" or (seconds or 0) > settings.TRANSCRIBE_MAX_SECONDS:
        return TranscriptStatus.OFF
    return TranscriptStatus.PENDING


def transcription_engine(name: str | None = None) -> Engine | None:
    """The engine TRANSCRIBE_ENGINE names (or `name`), made once per process: whisper with
    TRANSCRIBE_MODEL_DIR when it is set. None for `off`. What every transcription uses, the
    voicemail's here and any other (`.transcribe(wav, hints=...)` on a short utterance)."""
    name = name or settings.TRANSCRIBE_ENGINE
    if name == "whisper" and settings.TRANSCRIBE_MODEL_DIR:
        return engine_for(name, model_dir=settings.TRANSCRIBE_MODEL_DIR)
    return engine_for(name)


def _lease() -> timedelta:
    # Longer than the longest message can take at the engine's measured speed, with room
    # for a busy machine: twice its length, and a minute.
    return timedelta(seconds=2 * settings.TRANSCRIBE_MAX_SECONDS + 60)


# --- the slots -----------------------------------------------------------------------------
def _slot_take(recording_id) -> int | None:
    """One of the TRANSCRIBE_CONCURRENCY slots for `recording_id`, or None when all are held.
    The slots' rows are made the first time they are missing (a new or raised setting)."""
    count = settings.TRANSCRIBE_CONCURRENCY
    for _ in range(2):
        now = timezone.now()
        for slot in range(count):
            taken = TranscriptionSlot.objects.filter(
                Q(lease_until__isnull=True) | Q(lease_until__lt=now), slot=slot
            ).update(record=recording_id, lease_until=now + _lease())
            if taken:
                return slot
        if TranscriptionSlot.objects.filter(slot__lt=count).count() == count:
            return None
        TranscriptionSlot.objects.bulk_create(
            [TranscriptionSlot(slot=slot) for slot in range(count)], ignore_conflicts=True
        )
    return None


def _slot_give_back(slot: int, recording_id) -> None:
    TranscriptionSlot.objects.filter(slot=slot, record=recording_id).update(
        record=None, lease_until=None
    )


# --- where the engine runs -----------------------------------------------------------------
# In this process unless the worker asks for child processes (transcribe_in_processes): an
# engine's model takes memory and CPU for seconds at a time (pocketsphinx even holds the GIL
# while it decodes, which would stall the worker's other threads, the tasks that dispatch
# calls), and a crash in its C code must take only its own process down.
_processes: ProcessPoolExecutor | None = None
_processes_lock = threading.Lock()
_process_count = 0  # the pool's size, for the pool that replaces a broken one


def transcribe_in_processes(count: int) -> None:
    """Run the engine in `count` child processes of this one from now on (relay_worker: one
    per transcribing thread). Each is started fresh (spawn, not fork: this process has
    threads and database connections), sets Django up, and loads the model once."""
    global _processes, _process_count
    with _processes_lock:
        _processes, _process_count = _new_pool(count), count


def _new_pool(count: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=count, mp_context=get_context("spawn"), initializer=django.setup
    )


def _run_engine(name: str, audio: bytes) -> Transcript:
    global _processes
    pool = _processes
    if pool is None:
        return transcription_engine(name).transcribe(audio)
    try:
        return pool.submit(_transcribe_in_child, name, audio).result()
    except BrokenProcessPool:
        # The engine died with this message (a crash in its C code): a new pool for the next
        # one; this one is failed, as any failure of the engine is the message's.
        with _processes_lock:  # not transcribe_in_processes: it takes this lock itself
            if _processes is pool:
                _processes = _new_pool(_process_count)
        raise


def _transcribe_in_child(name: str, audio: bytes) -> Transcript:
    return transcription_engine(name).transcribe(audio)


# --- one transcription ---------------------------------------------------------------------
def transcription_run(*, recording_id) -> str | None:
    """Transcribe the recording if it is still pending and no other worker holds it; store
    the outcome. Returns the status stored, or None when nothing was done."""
    slot = _slot_take(recording_id)
    if slot is None:
        with transaction.atomic():
            if _recording(recording_id).filter(transcript_status=TranscriptStatus.PENDING).exists():
                schedule_transcription(recording_id, after=SLOT_BUSY_RETRY)
        return None
    try:
        return _transcribe_held(recording_id)
    finally:
        _slot_give_back(slot, recording_id)


def _recording(recording_id):
    """The recording, as a queryset (one row at most)."""
    return Recording.objects.filter(pk=recording_id)


def _transcribe_held(recording_id) -> str | None:
    now = timezone.now()
    claimed = (
        _recording(recording_id)
        .filter(
            Q(transcribe_lease_until__isnull=True) | Q(transcribe_lease_until__lt=now),
            transcript_status=TranscriptStatus.PENDING,
        )
        .exclude(name="")
        .update(
            transcribe_lease_until=now + _lease(), transcribe_attempts=F("transcribe_attempts") + 1
        )
    )
    if not claimed:
        return None  # done, deleted, or held by another worker
    recording = _recording(recording_id).get()
    started = time.monotonic()
    try:
        with recordings_storage().open(recording.name, "rb") as file:
            audio = file.read()
    except FileNotFoundError:
        return None  # the recording was deleted meanwhile: so was its transcript
    result, status = NOTHING, TranscriptStatus.OFF  # the engine was turned off meanwhile
    if transcription_engine() is not None:
        try:
            result, status = _transcript_of(recording, audio), TranscriptStatus.DONE
        except Exception as exc:  # a failure of the engine is the recording's, not the worker's
            logger.warning("recording %s not transcribed: %s", recording_id, type(exc).__name__)
            result, status = NOTHING, TranscriptStatus.FAILED
    settled = _settle(recording, status=status, result=result)
    if settled:
        logger.info(
            "recording %s transcribed (%s) in %.2f s",
            recording_id,
            status,
            time.monotonic() - started,
        )
    return status if settled else None


def _transcript_of(recording: Recording, audio: bytes) -> Transcript:
    """The recording's transcript: a bridged call's (two channels, issue 58) a transcript per
    channel, each line labelled by its speaker ("caller: ..." then "callee: ..."), its
    confidence the channels' mean; any other's the engine's of the whole."""
    if recording.kind != RecordingKind.CALL:
        return _run_engine(settings.TRANSCRIBE_ENGINE, audio)
    lines, confidences = [], []
    for speaker, channel in zip(("caller", "callee"), _channels(audio), strict=True):
        heard = _run_engine(settings.TRANSCRIBE_ENGINE, channel)
        confidences.append(heard.confidence)
        if heard.text:
            lines.append(f"{speaker}: {heard.text}")
    return Transcript(text="\n".join(lines), confidence=round(sum(confidences) / 2, 2))


def _channels(wav: bytes) -> tuple[bytes, bytes]:
    """A stereo 16-bit WAV's two channels, each a mono WAV of its own."""
    with wave.open(io.BytesIO(wav), "rb") as stereo:
        rate, frames = stereo.getframerate(), stereo.readframes(stereo.getnframes())
    # Interleaved left, right: every other 2-byte sample (array's slices, in C; no numpy
    # import at every process's start for the one task that needs it). The bytes are moved,
    # never read as numbers, so the machine's byte order does not matter.
    samples = array("h", frames[: len(frames) // 4 * 4])
    out = []
    for index in range(2):
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as mono:
            mono.setnchannels(1)
            mono.setsampwidth(2)
            mono.setframerate(rate)
            mono.writeframes(samples[index::2].tobytes())
        out.append(buffer.getvalue())
    return out[0], out[1]


def _settle(recording: Recording, *, status: str, result: Transcript) -> bool:
    """Store the outcome if the recording is still the one transcribed and still pending,
    and have it announced, in one transaction: by TRANSCRIPT_ANNOUNCED's function for the
    recording's kind (a voicemail's record here, a `record` verb's call in realtime)."""
    done = status == TranscriptStatus.DONE
    outcome = {
        "transcript": result.text if done else "",
        "transcript_confidence": result.confidence if done else None,
        "transcript_status": status,
        "transcribe_lease_until": None,
    }
    with transaction.atomic():
        settled = (
            _recording(recording.pk)
            .filter(transcript_status=TranscriptStatus.PENDING, name=recording.name)
            .update(**outcome)
        )
        if not settled:
            return False
        for field, value in outcome.items():  # what the row now holds, without a read
            setattr(recording, field, value)
        import_string(settings.TRANSCRIPT_ANNOUNCED[recording.kind])(recording=recording)
    return True


def voicemail_transcribed(*, recording: Recording) -> None:
    """A voicemail's transcript, stored: the call's next event, `call_record.transcribed`
    pushed and the voicemail's mail queued, in the caller's transaction."""
    record = record_by_id(recording.call_id)
    if record is None:
        return
    # The transcript is the call's next event, numbered after its end.
    call = Call.objects.only("id", "status").get(pk=recording.call_id)
    seqs = call_reports_add(
        call=call,
        reports=[Report(kind="transcribed", detail=recording.transcript_status)],
        at=timezone.now(),
    )
    record.seq = seqs[-1] if seqs else record.seq
    event = record_frame(TRANSCRIBED, record)
    events.send_to_user_on_commit(user_id=record.owner_id, event=event)
    events.send_to_members_on_commit(
        members=number_members_heard(number_id=record.number_id), event=event
    )
    notifications.voicemail_mail_queue(record=record)


# --- the sweep -----------------------------------------------------------------------------
def transcriptions_sweep() -> int:
    """Queue again the recordings whose worker died mid-way (their lease has passed), or mark
    them failed (and announce them) after TRANSCRIBE_ATTEMPTS starts; return how many."""
    now = timezone.now()
    stale = list(
        Recording.objects.filter(
            transcript_status=TranscriptStatus.PENDING, transcribe_lease_until__lt=now
        ).values_list("pk", "transcribe_attempts")[:100]
    )
    for pk, attempts in stale:
        with transaction.atomic():
            held = _recording(pk).filter(
                transcript_status=TranscriptStatus.PENDING, transcribe_lease_until__lt=now
            )
            if attempts >= TRANSCRIBE_ATTEMPTS:
                # the whole row only for the few given up on: their announcement reads it
                if recording := held.first():
                    _settle(recording, status=TranscriptStatus.FAILED, result=NOTHING)
            elif held.update(transcribe_lease_until=None):
                schedule_transcription(pk)
    return len(stale)
