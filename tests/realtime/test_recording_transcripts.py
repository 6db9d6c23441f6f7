"""What a `record` verb of an outbound call's script kept is transcribed as voicemail is
(issue 56: "the same engine transcribes any call recording"): pending when kept
(realtime.services.call_recording_add, the agent's store), made by the worker's `transcribe`
queue (history.tasks), listed under the call's `recordings` in GET /api/calls/:callId, and
announced as the call's `transcribed` event: a `call_status` frame to the owner's sockets and
webhook. Off with the engine off or past TRANSCRIBE_MAX_SECONDS; `failed` for audio the engine
cannot read, announced all the same; the sweep's lease; never logged.

The engine is the real one (Whisper), on espeak-ng speech."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.files.base import ContentFile
from django.utils import timezone

from calls.models import Recording
from calls.states import CallState
from core.recordings import recordings_storage
from harness.speech import spoken_message
from history import tasks
from realtime.services import call_recording_add
from tests.conftest import drain_tasks
from tests.factories import CallFactory, wav_bytes
from tests.history.speech import CONTENT_WORDS, heard_words, require_speech
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_set

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _engine_on(settings):
    settings.TRANSCRIBE_ENGINE = "whisper"
    settings.TRANSCRIBE_CONCURRENCY = 1


@pytest.fixture(scope="module")
def spoken() -> tuple[bytes, float]:
    require_speech()
    return spoken_message()


@pytest.fixture
def call(user):
    return CallFactory(owner=user, status=CallState.IN_PROGRESS, call_id="survey-1")


def kept(call, data: bytes, seconds: float) -> uuid.UUID:
    """A recording of `call`, as the agent keeps what a `record` verb heard: the WAV saved
    in the recordings storage, then call_recording_add."""
    recording_id = uuid.uuid4()
    name = recordings_storage().save(f"{recording_id.hex}.wav", ContentFile(data))
    call_recording_add(call=call, recording_id=recording_id, name=name, seconds=seconds)
    return recording_id


def listed(client, call) -> dict:
    (recording,) = client.get(f"/api/calls/{call.call_id}").json()["recordings"]
    return recording


def test_a_recording_is_pending_then_transcribed_and_listed_with_its_call(call, client_jwt, spoken):
    recording_id = kept(call, *spoken)
    recording = listed(client_jwt, call)
    assert recording["id"] == str(recording_id)
    assert (
        recording["transcriptStatus"],
        recording["transcript"],
        recording["transcriptConfidence"],
    ) == ("pending", "", None)

    drain_tasks()

    recording = listed(client_jwt, call)
    assert recording["transcriptStatus"] == "done"
    assert 0 <= recording["transcriptConfidence"] <= 1
    assert len(heard_words(recording["transcript"]) & CONTENT_WORDS) >= 4, recording
    timeline = client_jwt.get(f"/api/calls/{call.call_id}").json()["timeline"]
    assert timeline[-1]["event"] == "transcribed"
    assert timeline[-1]["verb"] == "record"
    assert timeline[-1]["result"] == {
        "recordingId": str(recording_id),
        "transcriptStatus": "done",
        "transcript": recording["transcript"],
        "transcriptConfidence": recording["transcriptConfidence"],
    }


async def test_the_transcript_is_the_calls_next_event_on_the_socket(
    call, communicator, login, spoken
):
    socket, connected = await communicator(token=login.token)
    assert connected
    recording_id = await sync_to_async(kept)(call, *spoken)
    seq = await sync_to_async(lambda: type(call).objects.get(pk=call.pk).last_seq)()

    await sync_to_async(drain_tasks)()

    frame = await socket.receive_json_from(timeout=30)
    assert (frame["type"], frame["callId"], frame["status"]) == (
        "call_status",
        "survey-1",
        "in_progress",
    )
    assert (frame["event"], frame["verb"], frame["seq"]) == ("transcribed", "record", seq + 1)
    assert frame["result"]["recordingId"] == str(recording_id)
    assert frame["result"]["transcriptStatus"] == "done"
    stored = await sync_to_async(Recording.objects.get)(pk=recording_id)
    assert frame["result"]["transcript"] == stored.transcript != ""


def test_the_owners_webhook_gets_the_transcript_as_a_call_status(call, user, spoken, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    webhook_set(user=user, url="https://hooks.example.com/relay", events=["call_status"])
    recording_id = kept(call, *spoken)

    assert tasks.transcription_run(recording_id=recording_id) == "done"

    (row,) = WebhookDelivery.objects.filter(user_id=user.pk)
    body = json.loads(row.payload)
    assert (row.event_type, body["event"]) == ("call_status", "transcribed")
    assert body["result"]["transcript"] == Recording.objects.get(pk=recording_id).transcript


def test_with_the_engine_off_a_recording_is_off_and_nothing_is_queued(call, client_jwt, settings):
    settings.TRANSCRIBE_ENGINE = "off"
    recording_id = kept(call, wav_bytes(1.0), 1.0)

    assert listed(client_jwt, call)["transcriptStatus"] == "off"
    assert tasks.transcription_run(recording_id=recording_id) is None
    from django_tasks_db.models import DBTaskResult

    assert not DBTaskResult.objects.filter(queue_name="transcribe").exists()


def test_a_recording_longer_than_the_limit_is_not_transcribed(call, client_jwt, settings):
    settings.TRANSCRIBE_MAX_SECONDS = 2.0
    kept(call, wav_bytes(2.5), 2.5)

    drain_tasks()

    recording = listed(client_jwt, call)
    assert (recording["transcriptStatus"], recording["transcript"]) == ("off", "")


def test_audio_the_engine_cannot_read_fails_and_is_announced(call, client_jwt, caplog):
    recording_id = kept(call, b"RIFF but not a wave file" * 50, 1.0)

    with caplog.at_level(logging.INFO):
        assert tasks.transcription_run(recording_id=recording_id) == "failed"

    recording = listed(client_jwt, call)
    assert (recording["transcriptStatus"], recording["transcript"]) == ("failed", "")
    last = client_jwt.get(f"/api/calls/{call.call_id}").json()["timeline"][-1]
    assert (last["event"], last["result"]["transcriptStatus"]) == ("transcribed", "failed")
    assert f"recording {recording_id} not transcribed" in caplog.text


def test_a_recording_whose_worker_died_again_and_again_ends_failed(call, client_jwt, clock):
    recording_id = kept(call, wav_bytes(1.0), 1.0)
    Recording.objects.filter(pk=recording_id).update(
        transcribe_lease_until=timezone.now() + timedelta(minutes=1),
        transcribe_attempts=tasks.TRANSCRIBE_ATTEMPTS,
    )
    assert tasks.transcriptions_sweep() == 0  # its lease is live

    clock.advance(minutes=2)
    assert tasks.transcriptions_sweep() == 1

    recording = listed(client_jwt, call)
    assert recording["transcriptStatus"] == "failed"
    last = client_jwt.get(f"/api/calls/{call.call_id}").json()["timeline"][-1]
    assert last["event"] == "transcribed"


def test_a_recording_of_a_call_deleted_meanwhile_is_never_transcribed(call, spoken):
    recording_id = kept(call, *spoken)
    type(call).objects.filter(pk=call.pk).delete()

    drain_tasks()

    assert not Recording.objects.filter(pk=recording_id).exists()


def test_the_transcript_of_a_recording_is_never_logged(call, caplog, spoken):
    recording_id = kept(call, *spoken)
    with caplog.at_level(logging.DEBUG):
        drain_tasks()

    transcript = Recording.objects.get(pk=recording_id).transcript
    assert transcript
    assert transcript.lower() not in caplog.text.lower()
