"""A voicemail's transcript (history.tasks): pending with the record, made by the worker's
`transcribe` queue, stored and announced as `call_record.transcribed` to sockets, the webhook
and Matrix; `off` and too long; a failure; deletion; at most TRANSCRIBE_CONCURRENCY at once
across workers; a worker that died mid-way, taken up again by the sweep; never logged; a
silent or cut-off message; a model that is not the one Relay ships, refused; an operator's
own model directory (TRANSCRIBE_MODEL_DIR).

The engine is the real one (Whisper, the default), on espeak-ng speech where words matter."""

from __future__ import annotations

import io
import json
import logging
import wave
from datetime import timedelta
from functools import partial

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from calls.models import Recording
from harness.speech import spoken_message
from history import tasks, transcription
from history.models import TranscriptionSlot
from history.services import call_record_recording_delete, record_inbound_call
from history.transcription import (
    WHISPER_MODEL_FILES,
    WhisperEngine,
    bundled_model_dir,
    register_engine,
)
from tests.conftest import drain_tasks
from tests.factories import NumberFactory, voicemail_on
from tests.history.speech import CONTENT_WORDS, heard_words, require_speech
from tests.records import records_count, refreshed, voicemail_id
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_set

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = "+447700900123"


@pytest.fixture(autouse=True)
def _engine_on(settings):
    settings.TRANSCRIBE_ENGINE = "whisper"
    settings.TRANSCRIBE_CONCURRENCY = 1


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


@pytest.fixture(scope="module")
def spoken() -> tuple[bytes, float]:
    require_speech()
    return spoken_message()


def test_a_message_is_pending_then_transcribed_by_the_worker(number, client_jwt, spoken):
    record = voicemail_on(number, data=spoken[0], seconds=spoken[1])
    entry = client_jwt.get("/api/history").json()["history"][0]
    assert (entry["transcript_status"], entry["transcript"], entry["transcript_confidence"]) == (
        "pending",
        "",
        None,
    )

    drain_tasks()

    entry = client_jwt.get("/api/history").json()["history"][0]
    assert entry["id"] == str(record.pk)
    assert entry["transcript_status"] == "done"
    assert 0 <= entry["transcript_confidence"] <= 1
    heard = heard_words(entry["transcript"])
    assert len(heard & CONTENT_WORDS) >= 4, entry["transcript"]  # most of them
    # As Whisper writes it: a capital to start, a stop to end.
    assert entry["transcript"][0].isupper() and entry["transcript"][-1] in ".?!", entry


async def test_the_transcript_is_its_own_event_on_the_socket(number, communicator, login, spoken):
    socket, connected = await communicator(token=login.token)
    assert connected
    record = await sync_to_async(voicemail_on)(number, data=spoken[0], seconds=spoken[1])
    first = await socket.receive_json_from(timeout=5)
    assert (first["type"], first["id"], first["transcript_status"]) == (
        "call_record",
        str(record.pk),
        "pending",
    )

    await sync_to_async(drain_tasks)()

    frame = await socket.receive_json_from(timeout=30)
    record = await sync_to_async(refreshed)(record)
    assert frame["type"] == "call_record.transcribed"
    assert frame["id"] == str(record.pk)
    assert (frame["transcript"], frame["transcript_status"]) == (record.transcript, "done")
    assert frame["transcript_confidence"] == record.transcript_confidence
    assert frame["recording_url"] == f"/api/history/{record.pk}/recording"
    # The record is the call's end (its event 3), and the transcript its next event.
    assert (first["call"], first["seq"]) == (str(record.pk), 3)
    assert (frame["call"], frame["seq"]) == (str(record.pk), 4)
    assert record.seq == 4


def test_a_webhook_that_takes_records_gets_the_transcript_after_its_record(
    number, user, spoken, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    webhook_set(user=user, url="https://hooks.example.com/relay", events=["call_record"])
    record = voicemail_on(number, data=spoken[0], seconds=spoken[1])
    tasks.transcription_run(recording_id=voicemail_id(record))

    rows = list(WebhookDelivery.objects.filter(user_id=user.pk).order_by("id"))
    assert [row.event_type for row in rows] == ["call_record", "call_record.transcribed"]
    assert {row.ordering_key for row in rows} == {f"record:{record.pk}"}
    body = json.loads(rows[1].payload)
    record = refreshed(record)
    assert (body["type"], body["transcript"]) == ("call_record.transcribed", record.transcript)


def test_with_the_engine_off_the_message_is_off_and_nothing_is_queued(number, settings):
    settings.TRANSCRIBE_ENGINE = "off"
    record = voicemail_on(number, seconds=1.0)

    assert record.transcript_status == "off"
    assert not records_count(transcript_status="pending") > 0
    assert tasks.transcription_run(recording_id=voicemail_id(record)) is None
    record = refreshed(record)
    assert (record.transcript_status, record.transcript) == ("off", "")


def test_a_message_longer_than_the_limit_is_not_transcribed(number, settings):
    settings.TRANSCRIBE_MAX_SECONDS = 2.0
    record = voicemail_on(number, seconds=2.5)

    assert record.transcript_status == "off"
    drain_tasks()
    record = refreshed(record)
    assert (record.transcript_status, record.transcript) == ("off", "")


def test_a_call_without_a_message_has_no_transcript_status(number):
    record = record_inbound_call(number=number, caller_num=CALLER, status="missed", duration=0)

    assert record.transcript_status is None


def test_audio_the_engine_cannot_read_fails_alone(number, caplog):
    record = voicemail_on(number, data=b"RIFF but not a wave file" * 50)

    with caplog.at_level(logging.INFO):
        assert tasks.transcription_run(recording_id=voicemail_id(record)) == "failed"

    record = refreshed(record)
    assert (record.transcript_status, record.transcript, record.transcript_confidence) == (
        "failed",
        "",
        None,
    )
    assert "not transcribed" in caplog.text


def test_deleting_the_message_deletes_its_transcript(number, client_jwt, spoken):
    record = voicemail_on(number, data=spoken[0], seconds=spoken[1])
    drain_tasks()
    record = refreshed(record)
    assert record.transcript

    response = client_jwt.delete(f"/api/history/{record.pk}/recording")

    assert response.status_code == 200
    record = refreshed(record)
    assert (record.transcript, record.transcript_confidence, record.transcript_status) == (
        "",
        None,
        None,
    )
    entry = client_jwt.get("/api/history").json()["history"][0]
    assert (entry["transcript"], entry["transcript_status"]) == ("", None)


def test_a_message_deleted_while_pending_is_never_transcribed(number):
    record = voicemail_on(number, seconds=1.0)
    call_record_recording_delete(record=record)

    drain_tasks()

    record = refreshed(record)
    assert (record.transcript_status, record.transcript) == (None, "")


def test_at_most_the_concurrency_run_at_once_across_workers(number, settings):
    """A slot held by another worker (its lease live) makes this one wait its turn: the task
    comes back later, and the message is transcribed once the slot is free."""
    settings.TRANSCRIBE_CONCURRENCY = 2
    record = voicemail_on(number, seconds=1.0)
    held_until = timezone.now() + timedelta(minutes=5)
    TranscriptionSlot.objects.bulk_create(
        [TranscriptionSlot(slot=slot, record=None, lease_until=held_until) for slot in (0, 1)]
    )

    assert tasks.transcription_run(recording_id=voicemail_id(record)) is None
    message = Recording.objects.get(call_id=record.pk)
    assert (message.transcript_status, message.transcribe_attempts) == ("pending", 0)
    from django_tasks_db.models import DBTaskResult

    again = DBTaskResult.objects.filter(queue_name="transcribe", status="READY")
    assert again.count() == 2  # the first task (still queued here) and its return, later
    assert any(task.run_after > timezone.now() for task in again)

    TranscriptionSlot.objects.filter(slot=1).update(lease_until=None)
    assert tasks.transcription_run(recording_id=voicemail_id(record)) == "done"
    assert TranscriptionSlot.objects.get(slot=1).lease_until is None  # given back
    assert TranscriptionSlot.objects.get(slot=0).lease_until == held_until


def test_a_worker_that_died_mid_way_is_replaced_by_the_sweep(number, clock):
    record = voicemail_on(number, seconds=1.0)
    # A worker claimed it and died: the lease is live, then passes.
    Recording.objects.filter(call_id=record.pk).update(
        transcribe_lease_until=timezone.now() + timedelta(minutes=1), transcribe_attempts=1
    )
    assert tasks.transcriptions_sweep() == 0  # still held
    # held by the dead worker
    assert tasks.transcription_run(recording_id=voicemail_id(record)) is None

    clock.advance(minutes=2)
    assert tasks.transcriptions_sweep() == 1
    drain_tasks()

    message = Recording.objects.get(call_id=record.pk)
    assert (message.transcript_status, message.transcribe_attempts) == ("done", 2)


def test_a_message_that_kills_its_worker_again_and_again_ends_failed(number, clock):
    record = voicemail_on(number, seconds=1.0)
    Recording.objects.filter(call_id=record.pk).update(
        transcribe_lease_until=timezone.now(), transcribe_attempts=tasks.TRANSCRIBE_ATTEMPTS
    )
    clock.advance(seconds=1)

    assert tasks.transcriptions_sweep() == 1

    message = Recording.objects.get(call_id=record.pk)
    assert (message.transcript_status, message.transcribe_lease_until) == ("failed", None)


def test_the_transcript_is_never_logged(number, caplog, spoken):
    record = voicemail_on(number, data=spoken[0], seconds=spoken[1])
    with caplog.at_level(logging.DEBUG):
        drain_tasks()

    record = refreshed(record)
    assert record.transcript
    logged = caplog.text.lower()
    assert record.transcript.lower() not in logged
    # Every longer word of it (a short one, "to", is in the worker's own lines).
    for word in {word for word in heard_words(record.transcript) if len(word) >= 4}:
        assert word not in logged, word


def test_a_silent_message_is_done_with_no_words(number):
    """Three seconds of digital silence (a caller who said nothing): `done`, no words, no
    confidence in them, and no word invented."""
    silence = voicemail_on(number, data=wav_of_silence(3.0), seconds=3.0)

    assert tasks.transcription_run(recording_id=voicemail_id(silence)) == "done"
    record = refreshed(silence)
    assert (record.transcript, record.transcript_confidence) == ("", 0.0)


def test_a_message_cut_off_mid_file_is_transcribed_as_far_as_it_goes(number, spoken):
    """A WAV whose data stops before its header says (the file cut short): `done`, with the
    words up to the cut."""
    wav = spoken[0]
    record = voicemail_on(number, data=wav[: 44 + (len(wav) - 44) // 2], seconds=spoken[1])

    assert tasks.transcription_run(recording_id=voicemail_id(record)) == "done"
    heard = heard_words(refreshed(record).transcript)
    assert "morning" in heard and "friday" not in heard, heard


def wav_of_silence(seconds: float) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * int(8000 * seconds))
    return buffer.getvalue()


def model_copy(to, *, model_bin: bytes | None = None):
    """A model directory at `to`: the bundled model's files linked, model.bin replaced by
    `model_bin` when given."""
    to.mkdir()
    for name in (*WHISPER_MODEL_FILES, "vocabulary.txt"):
        (to / name).symlink_to(bundled_model_dir() / name)
    if model_bin is not None:
        (to / "model.bin").unlink()
        (to / "model.bin").write_bytes(model_bin)
    return to


@pytest.fixture
def engines(monkeypatch):
    """The engines' registry as it was after the test (a test registers one of its own)."""
    monkeypatch.setattr(transcription, "ENGINES", dict(transcription.ENGINES))
    monkeypatch.setattr(transcription, "_made", {})


def test_a_model_file_that_is_not_the_one_shipped_is_refused_and_the_message_fails(
    number, engines, tmp_path, caplog
):
    """A model.bin whose sha256 is not the shipped one's (here the real file with one byte
    more): refused at load with one clear error line, the message `failed`, never a
    transcript by a wrong model. The refusal holds for the process: the next message fails
    too, without hashing the file again (put right meanwhile, it is still refused)."""
    good = (bundled_model_dir() / "model.bin").read_bytes()
    tampered = model_copy(tmp_path / "model", model_bin=good + b"\0")
    register_engine(
        "whisper",
        partial(WhisperEngine, tampered, sha256=transcription.WHISPER_MODEL_SHA256),
    )
    first = voicemail_on(number, seconds=1.0)

    with caplog.at_level(logging.INFO):
        assert tasks.transcription_run(recording_id=voicemail_id(first)) == "failed"

    refusals = [r for r in caplog.records if "Whisper model refused" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.ERROR, caplog.text
    assert transcription.WHISPER_MODEL_SHA256 in refusals[0].getMessage()
    assert "not transcribed: ModelRefused" in caplog.text
    record = refreshed(first)
    assert (record.transcript_status, record.transcript) == ("failed", "")

    (tampered / "model.bin").unlink()
    (tampered / "model.bin").symlink_to(bundled_model_dir() / "model.bin")
    caplog.clear()
    second = voicemail_on(number, seconds=1.0)
    with caplog.at_level(logging.INFO):
        assert tasks.transcription_run(recording_id=voicemail_id(second)) == "failed"
    assert "Whisper model refused" not in caplog.text  # said once, at the load


def test_a_model_directory_without_its_tokenizer_is_refused_not_fetched(tmp_path, caplog):
    """faster-whisper fetches a missing tokenizer.json from the Hugging Face hub: Relay
    refuses the directory first, naming the file."""
    directory = model_copy(tmp_path / "model")
    (directory / "tokenizer.json").unlink()
    engine = WhisperEngine(directory)

    with caplog.at_level(logging.INFO), pytest.raises(transcription.ModelRefused):
        engine.load()
    assert "has no tokenizer.json" in caplog.text


def test_an_operators_own_model_directory_is_used_unchecked_and_says_so(
    number, settings, tmp_path, caplog, spoken
):
    """TRANSCRIBE_MODEL_DIR: a CTranslate2 model directory of the operator's (here the
    bundled model's files, linked): used with its sha256 not checked, and a log line that
    says so."""
    settings.TRANSCRIBE_MODEL_DIR = str(model_copy(tmp_path / "own-model"))
    record = voicemail_on(number, data=spoken[0], seconds=spoken[1])

    with caplog.at_level(logging.INFO):
        assert tasks.transcription_run(recording_id=voicemail_id(record)) == "done"

    assert "TRANSCRIBE_MODEL_DIR" in caplog.text and "sha256 is not checked" in caplog.text
    assert tasks.transcription_engine().model_dir == tmp_path / "own-model"
    assert len(heard_words(refreshed(record).transcript) & CONTENT_WORDS) >= 4
