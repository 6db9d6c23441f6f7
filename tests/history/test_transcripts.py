"""A voicemail's transcript (history.tasks): pending with the record, made by the worker's
`transcribe` queue, stored and announced as `call_record.transcribed` to sockets, the webhook
and Matrix; `off` and too long; a failure; deletion; at most TRANSCRIBE_CONCURRENCY at once
across workers; a worker that died mid-way, taken up again by the sweep; never logged.

The engine is the real one (pocketsphinx), on espeak-ng speech where words matter."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from calls.models import Recording
from harness.speech import spoken_message
from history import tasks
from history.models import TranscriptionSlot
from history.services import call_record_recording_delete, record_inbound_call
from tests.conftest import drain_tasks
from tests.factories import NumberFactory, voicemail_on
from tests.history.speech import CONTENT_WORDS, require_speech
from tests.records import records_count, refreshed
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_set

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = "+447700900123"


@pytest.fixture(autouse=True)
def _engine_on(settings):
    settings.TRANSCRIBE_ENGINE = "pocketsphinx"
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
    heard = set(entry["transcript"].split())
    assert len(heard & CONTENT_WORDS) >= 3, entry["transcript"]  # most of them


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
    tasks.transcription_run(record_id=record.pk)

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
    assert tasks.transcription_run(record_id=record.pk) is None
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
        assert tasks.transcription_run(record_id=record.pk) == "failed"

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

    assert tasks.transcription_run(record_id=record.pk) is None
    message = Recording.objects.get(call_id=record.pk)
    assert (message.transcript_status, message.transcribe_attempts) == ("pending", 0)
    from django_tasks_db.models import DBTaskResult

    again = DBTaskResult.objects.filter(queue_name="transcribe", status="READY")
    assert again.count() == 2  # the first task (still queued here) and its return, later
    assert any(task.run_after > timezone.now() for task in again)

    TranscriptionSlot.objects.filter(slot=1).update(lease_until=None)
    assert tasks.transcription_run(record_id=record.pk) == "done"
    assert TranscriptionSlot.objects.get(slot=1).lease_until is None  # given back
    assert TranscriptionSlot.objects.get(slot=0).lease_until == held_until


def test_a_worker_that_died_mid_way_is_replaced_by_the_sweep(number, clock):
    record = voicemail_on(number, seconds=1.0)
    # A worker claimed it and died: the lease is live, then passes.
    Recording.objects.filter(call_id=record.pk).update(
        transcribe_lease_until=timezone.now() + timedelta(minutes=1), transcribe_attempts=1
    )
    assert tasks.transcriptions_sweep() == 0  # still held
    assert tasks.transcription_run(record_id=record.pk) is None  # held by the dead worker

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
    assert record.transcript not in logged
    # Every longer word of it (a short one, "to", is in the worker's own lines).
    for word in {word for word in record.transcript.split() if len(word) >= 4}:
        assert word not in logged, word
