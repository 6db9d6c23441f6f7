"""A bridged call's recording (issue 58) after its bridge: its row and WAV made through
history.recordings and the recorder (telephony.sip.recorder) as the agent makes them, then
`recording.completed` to the owner's and members' webhooks, the download with byte ranges
(owner and members only), deletion, retention (CALL_RECORDING_RETENTION_DAYS), the account
export and the account's deletion. The recording of a real call through the SIP agent is
tests/telephony/test_call_recording.py."""

from __future__ import annotations

import asyncio
import io
import json
import wave
import zipfile
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.utils import timezone

from calls.models import Recording, RecordingKind
from core.recordings import recordings_storage
from harness.speech import SENTENCE, spoken_alaw
from history.recordings import call_recording_done, call_recording_open
from matrix.models import MatrixMessage, MatrixRoom
from telephony.sip.recorder import CALLER, OTHER, CallRecorder
from tests.conftest import api_key_client, drain_tasks
from tests.factories import (
    DEFAULT_PASSWORD,
    CallRecordFactory,
    NumberFactory,
    NumberMemberFactory,
    UserFactory,
    voicemail_on,
)
from tests.history.speech import CONTENT_WORDS, heard_words, require_speech
from tests.records import voicemail_id
from virtual_numbers.models import NumberMember
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_set

pytestmark = pytest.mark.django_db(transaction=True)

TARGET = "+441134960200"
LOUD_MU, QUIET_A = 0x10, 0xD5  # a loud mu-law code, A-law silence


def recorded_call(number, *, seconds: float = 0.6):
    """A forwarded call to `number` whose bridge was recorded `seconds` long: the caller's
    channel loud, the other silent. Returns the Recording."""
    record = CallRecordFactory(number=number, answered_by="forward", forwarded_to=TARGET)
    row, path = call_recording_open(call_id=record.pk)

    async def bridge():
        recorder = CallRecorder(path, label="test")
        caller, other = recorder.tap(CALLER), recorder.tap(OTHER)
        for _ in range(round(seconds / 0.02)):
            caller(bytes([LOUD_MU]) * 160, 0)
            other(bytes([QUIET_A]) * 160, 8)
            await asyncio.sleep(0.02)
        await recorder.close()
        return recorder

    recorder = asyncio.run(bridge())
    call_recording_done(recording=row, seconds=recorder.seconds, incomplete=recorder.incomplete)
    return Recording.objects.get(pk=row.pk)


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, recording_enabled=True)


def test_the_recording_is_a_stereo_wav_as_long_as_the_bridge_and_complete(number):
    recording = recorded_call(number, seconds=0.6)

    assert (recording.kind, recording.incomplete) == (RecordingKind.CALL, False)
    assert recording.transcript_status == "off"  # TRANSCRIBE_ENGINE=off in tests
    with recordings_storage().open(recording.name, "rb") as file, wave.open(file) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (2, 2, 8000)
        assert abs(wav.getnframes() / 8000 - recording.seconds) < 0.01
        assert abs(recording.seconds - 0.6) < 0.1
        frames = wav.readframes(wav.getnframes())
    left = [int.from_bytes(frames[i : i + 2], "little", signed=True) for i in range(0, 4000, 4)]
    right = [
        int.from_bytes(frames[i + 2 : i + 4], "little", signed=True) for i in range(0, 4000, 4)
    ]
    assert max(map(abs, left)) > 10000 and max(map(abs, right)) < 100


def test_recording_completed_reaches_the_owners_and_a_members_webhook(user, other_user, number):
    webhook_set(user=user, url="https://hooks.example.com/relay", events=["recording.completed"])
    webhook_set(user=other_user, url="https://hooks.example.com/member", events=[])
    NumberMemberFactory(number=number, user=other_user, notify_webhook=True)

    recording = recorded_call(number)

    deliveries = WebhookDelivery.objects.filter(event_type="recording.completed")
    assert sorted(d.url for d in deliveries) == [
        "https://hooks.example.com/member",
        "https://hooks.example.com/relay",
    ]
    body = json.loads(deliveries[0].payload)
    assert body["type"] == "recording.completed"
    assert body["id"] == str(recording.pk)
    assert body["recording_url"] == f"/api/recordings/{recording.pk}"
    assert (body["number"], body["incomplete"], body["transcript_status"]) == (
        number.number,
        False,
        "off",
    )
    assert body["seconds"] == recording.seconds


def test_a_webhook_without_the_event_gets_none(user, number):
    webhook_set(user=user, url="https://hooks.example.com/relay", events=["call_record"])

    recorded_call(number)

    assert not WebhookDelivery.objects.filter(event_type="recording.completed").exists()


def test_the_owner_downloads_it_whole_and_by_byte_range(client_jwt, number):
    recording = recorded_call(number)
    url = f"/api/recordings/{recording.pk}"

    whole = client_jwt.get(url)
    assert whole.status_code == 200
    assert whole["Content-Type"] == "audio/wav"
    body = b"".join(whole.streaming_content)
    assert body[:4] == b"RIFF" and body[8:12] == b"WAVE"

    part = client_jwt.get(url, HTTP_RANGE="bytes=4-11")
    assert part.status_code == 206
    assert part["Content-Range"] == f"bytes 4-11/{len(body)}"
    assert b"".join(part.streaming_content) == body[4:12]

    past = client_jwt.get(url, HTTP_RANGE=f"bytes={len(body) + 10}-")
    assert (past.status_code, past.json()["code"]) == (416, "range_not_satisfiable")


def test_a_member_downloads_it_and_an_outsider_or_a_removed_member_gets_404(
    user, other_user, number
):
    recording = recorded_call(number)
    url = f"/api/recordings/{recording.pk}"
    member = api_key_client(other_user.api_key)

    assert member.get(url).status_code == 404  # not a member yet
    NumberMemberFactory(number=number, user=other_user)
    assert member.get(url).status_code == 200
    # a member may not delete it
    assert member.delete(url).status_code == 404
    assert Recording.objects.filter(pk=recording.pk).exists()
    # removed from the number (DELETE .../members/:id), they hear it no more
    member_id = NumberMember.objects.get(user=other_user).pk
    owner = api_key_client(user.api_key)
    assert owner.delete(f"/api/numbers/{number.pk}/members/{member_id}").status_code in (200, 204)
    response = member.get(url)
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


@pytest.mark.parametrize("bad", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_or_malformed_id_is_404(client_jwt, bad):
    response = client_jwt.get(f"/api/recordings/{bad}")

    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_a_voicemail_is_no_call_recording(client_jwt, number):
    record = voicemail_on(number)

    assert client_jwt.get(f"/api/recordings/{voicemail_id(record)}").status_code == 404


def test_the_owner_deletes_it_with_its_file(client_jwt, number):
    recording = recorded_call(number)

    response = client_jwt.delete(f"/api/recordings/{recording.pk}")

    assert response.status_code == 200
    assert not Recording.objects.filter(pk=recording.pk).exists()
    assert not recordings_storage().exists(recording.name)
    assert client_jwt.get(f"/api/recordings/{recording.pk}").status_code == 404


def test_retention_purges_recordings_older_than_the_setting_and_keeps_the_rest(number, settings):
    settings.CALL_RECORDING_RETENTION_DAYS = 7
    old, young = recorded_call(number), recorded_call(number)
    Recording.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    Recording.objects.filter(pk=young.pk).update(created_at=timezone.now() - timedelta(days=6))

    out = io.StringIO()
    call_command("purge_expired", stdout=out)

    assert not Recording.objects.filter(pk=old.pk).exists()
    assert not recordings_storage().exists(old.name)
    assert Recording.objects.filter(pk=young.pk).exists()
    assert recordings_storage().exists(young.name)
    assert "1 recording(s) past retention" in out.getvalue()


def test_the_export_holds_the_recording_and_its_wav(client_jwt, user, other_user, number):
    recording = recorded_call(number)
    theirs = recorded_call(NumberFactory(owner=other_user))

    response = client_jwt.get("/api/user/export")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))

    account = json.loads(archive.read("account.json"))
    [exported] = account["call_recordings"]
    assert (exported["id"], exported["seconds"]) == (str(recording.pk), recording.seconds)
    wav = archive.read(f"call-recordings/{recording.pk}.wav")
    with recordings_storage().open(recording.name, "rb") as file:
        assert wav == file.read()
    assert f"call-recordings/{theirs.pk}.wav" not in archive.namelist()


def test_deleting_the_account_deletes_its_recordings_and_their_files(
    client_jwt, user, other_user, number
):
    recording = recorded_call(number)
    theirs = recorded_call(NumberFactory(owner=other_user))

    response = client_jwt.delete("/api/user/me", {"password": DEFAULT_PASSWORD}, format="json")

    assert response.status_code == 204
    assert not Recording.objects.filter(pk=recording.pk).exists()
    assert not recordings_storage().exists(recording.name)
    assert Recording.objects.filter(pk=theirs.pk).exists()
    assert recordings_storage().exists(theirs.name)


def test_the_transcript_is_made_per_channel_and_labelled_by_speaker(user, number, settings):
    """Whisper (the engine voicemail uses) on a recording whose caller spoke on the left and
    whose other party said nothing on the right: one line, the caller's."""
    require_speech()
    settings.TRANSCRIBE_ENGINE = "whisper"
    webhook_set(user=user, url="https://hooks.example.com/relay", events=["recording.completed"])
    alaw = spoken_alaw(SENTENCE)
    record = CallRecordFactory(number=number, answered_by="forward", forwarded_to=TARGET)
    row, path = call_recording_open(call_id=record.pk)

    async def bridge():
        recorder = CallRecorder(path, label="test")
        caller, other = recorder.tap(CALLER), recorder.tap(OTHER)
        for start in range(0, len(alaw), 160):
            caller(alaw[start : start + 160], 8)
            other(bytes([QUIET_A]) * 160, 8)
            await asyncio.sleep(0.02)
        await recorder.close()
        return recorder

    recorder = asyncio.run(bridge())
    call_recording_done(recording=row, seconds=recorder.seconds, incomplete=False)
    assert Recording.objects.get(pk=row.pk).transcript_status == "pending"
    assert not WebhookDelivery.objects.filter(event_type="recording.completed").exists()

    drain_tasks()

    recording = Recording.objects.get(pk=row.pk)
    assert recording.transcript_status == "done"
    [line] = recording.transcript.splitlines()
    assert line.startswith("caller: ")
    assert len(heard_words(line) & CONTENT_WORDS) >= 3, line
    # recording.completed is sent once, with the transcript.
    [delivery] = WebhookDelivery.objects.filter(event_type="recording.completed")
    body = json.loads(delivery.payload)
    assert (body["transcript_status"], body["transcript"]) == ("done", recording.transcript)


async def test_the_owners_and_a_members_sockets_get_recording_completed(
    communicator, user, other_user
):
    number = await sync_to_async(NumberFactory)(owner=user, recording_enabled=True)
    await sync_to_async(NumberMemberFactory)(number=number, user=other_user)
    owner_ws, _ = await communicator(user)
    member_ws, _ = await communicator(other_user)
    outsider_ws, _ = await communicator(await sync_to_async(UserFactory)())

    recording = await sync_to_async(recorded_call)(number)

    for socket in (owner_ws, member_ws):
        frame = await socket.receive_json_from(timeout=5)
        while frame["type"] != "recording.completed":  # the call's own frames before it
            frame = await socket.receive_json_from(timeout=5)
        assert (frame["id"], frame["seconds"], frame["incomplete"]) == (
            str(recording.pk),
            recording.seconds,
            False,
        )
    assert await outsider_ws.receive_nothing(timeout=0.3)


def test_a_matrix_notice_goes_to_the_owners_joined_room(user, number, settings):
    settings.MATRIX_ENABLED = True
    room = MatrixRoom.objects.create(
        user=user, matrix_id="@owner:localhost", room_id="!r:localhost", status="joined"
    )

    recording = recorded_call(number)

    [notice] = MatrixMessage.objects.filter(room=room, key=f"recording:{recording.pk}")
    assert f"to {number.number} recorded, {recording.seconds} s" in notice.body


def test_giving_the_number_back_deletes_its_calls_recordings_and_their_files(client_jwt, number):
    recording = recorded_call(number)

    response = client_jwt.delete(f"/api/numbers/{number.pk}")

    assert response.status_code in (200, 204), response.content
    assert not Recording.objects.filter(pk=recording.pk).exists()
    assert not recordings_storage().exists(recording.name)
