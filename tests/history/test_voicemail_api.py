"""Voicemail over REST: recording_url on the record, the audio to its owner only, deletion,
retention, and the files going with their number."""

import io
import os
import wave
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.utils import timezone

from calls.models import Recording
from core.recordings import recordings_storage
from history.services import record_inbound_call
from tests.factories import NumberFactory, wav_bytes
from tests.records import record_get, records_count

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def voicemail(user):
    """An answered call on one of `user`'s numbers, with a stored 1 s recording."""
    number = NumberFactory(owner=user)
    name = recordings_storage().save("test-message.wav", ContentFile(wav_bytes()))
    return record_inbound_call(
        number=number,
        caller_num="+447700900123",
        status="answered",
        duration=9,
        sip_call_id="call-1@test",
        recording=name,
        recording_seconds=1.0,
    )


def test_a_record_with_a_message_links_its_recording(client_jwt, voicemail):
    record = client_jwt.get("/api/history").json()["history"][0]

    assert record["recording_url"] == f"/api/history/{voicemail.pk}/recording"
    assert (record["recording_seconds"], record["heard"]) == (1.0, False)


def test_the_owner_gets_the_audio(client_jwt, client_key, voicemail):
    for client in (client_jwt, client_key):
        response = client.get(f"/api/history/{voicemail.pk}/recording", HTTP_ACCEPT="audio/*")

        assert response.status_code == 200
        assert response["Content-Type"] == "audio/wav"
        audio = b"".join(response.streaming_content)
        with wave.open(io.BytesIO(audio)) as wav:
            assert (wav.getframerate(), wav.getnframes()) == (8000, 8000)


def recording_bytes(voicemail) -> bytes:
    with recordings_storage().open(voicemail.recording, "rb") as stored:
        return stored.read()


@pytest.mark.parametrize(
    ("header", "first", "last"),
    [
        ("bytes=0-", 0, None),
        ("bytes=100-199", 100, 199),
        ("bytes=16000-", 16000, None),
        ("bytes=-44", -44, None),
        ("bytes=10-99999999", 10, None),  # the last byte past the end: up to the end
        ("bytes=-99999999999999999999999999999", 0, None),  # more than the file: all of it
    ],
)
def test_a_byte_range_is_answered_with_206(client_jwt, voicemail, header, first, last):
    """What a browser's <audio> asks for to seek (Safari plays nothing without it)."""
    whole = recording_bytes(voicemail)
    start = first if first >= 0 else len(whole) + first
    end = len(whole) - 1 if last is None else last

    response = client_jwt.get(f"/api/history/{voicemail.pk}/recording", HTTP_RANGE=header)

    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes {start}-{end}/{len(whole)}"
    assert response["Content-Length"] == str(end - start + 1)
    assert (response["Accept-Ranges"], response["Content-Type"]) == ("bytes", "audio/wav")
    assert b"".join(response.streaming_content) == whole[start : end + 1]


@pytest.mark.parametrize(
    "header",
    [
        None,
        "bytes=0-1,5-6",  # several ranges: the whole file
        "bytes=9-3",  # last before first: not a range
        "bytes=-",
        "items=0-10",
        "bytes=\u0661-",  # an Arabic-Indic digit is not a digit here
        "bytes=0-" + "1" * 5000 + "x",
    ],
)
def test_no_range_or_one_that_is_not_a_single_byte_range_gets_the_whole_file(
    client_jwt, voicemail, header
):
    extra = {} if header is None else {"HTTP_RANGE": header}

    response = client_jwt.get(f"/api/history/{voicemail.pk}/recording", **extra)

    assert response.status_code == 200
    assert response["Accept-Ranges"] == "bytes"
    assert b"".join(response.streaming_content) == recording_bytes(voicemail)


def test_if_range_gets_the_whole_file(client_jwt, voicemail):
    """A download carries no validator: If-Range cannot match, so the Range is ignored."""
    response = client_jwt.get(
        f"/api/history/{voicemail.pk}/recording",
        HTTP_RANGE="bytes=0-9",
        HTTP_IF_RANGE='"an-old-etag"',
    )

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == recording_bytes(voicemail)


@pytest.mark.parametrize(
    "header", ["bytes=16044-", "bytes=99999999-", "bytes=" + "9" * 5000 + "-", "bytes=-0"]
)
def test_a_range_past_the_end_is_416_with_the_size(client_jwt, voicemail, header):
    size = len(recording_bytes(voicemail))

    response = client_jwt.get(f"/api/history/{voicemail.pk}/recording", HTTP_RANGE=header)

    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{size}"
    assert response.json()["code"] == "range_not_satisfiable"


def test_another_users_recording_is_not_found(outsider, voicemail):
    response = outsider.get(f"/api/history/{voicemail.pk}/recording", HTTP_ACCEPT="audio/wav")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert outsider.delete(f"/api/history/{voicemail.pk}/recording").status_code == 404
    assert recordings_storage().exists(voicemail.recording)


@pytest.mark.parametrize("record_id", ["0", "not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_or_malformed_record_id_is_not_found(client_jwt, record_id):
    assert client_jwt.get(f"/api/history/{record_id}/recording").status_code == 404
    assert client_jwt.delete(f"/api/history/{record_id}/recording").status_code == 404


def test_a_call_without_a_message_has_no_recording(client_jwt, user):
    record = record_inbound_call(
        number=NumberFactory(owner=user), caller_num="+447700900123", status="missed", duration=0
    )

    assert client_jwt.get("/api/history").json()["history"][0]["recording_url"] is None
    response = client_jwt.get(f"/api/history/{record.pk}/recording")
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_deleting_a_recording_keeps_the_record(client_jwt, voicemail):
    response = client_jwt.delete(f"/api/history/{voicemail.pk}/recording")

    assert (response.status_code, response.json()) == (200, {"success": True})
    assert not recordings_storage().exists(voicemail.recording)
    record = client_jwt.get("/api/history").json()["history"][0]
    assert (record["id"], record["recording_url"], record["recording_seconds"]) == (
        str(voicemail.pk),
        None,
        None,
    )
    assert client_jwt.get(f"/api/history/{voicemail.pk}/recording").status_code == 404
    assert client_jwt.delete(f"/api/history/{voicemail.pk}/recording").status_code == 404


def test_deleting_a_number_deletes_its_recordings(client_jwt, voicemail):
    response = client_jwt.delete(f"/api/numbers/{voicemail.number_id}")

    assert response.status_code == 200
    assert not records_count(pk=voicemail.pk) > 0
    assert not recordings_storage().exists(voicemail.recording)


def test_a_re_sent_call_id_is_recorded_once(voicemail):
    again = record_inbound_call(
        number=voicemail.number,
        caller_num="+447700900123",
        status="missed",
        duration=0,
        sip_call_id=voicemail.sip_call_id,
    )

    assert again.pk == voicemail.pk
    assert records_count() == 1


def test_retention_purges_old_recordings_and_keeps_the_records(settings, voicemail, user):
    settings.VOICEMAIL_RETENTION_DAYS = 30
    fresh_name = recordings_storage().save("fresh.wav", ContentFile(wav_bytes(0.5)))
    fresh = record_inbound_call(
        number=voicemail.number,
        caller_num="+447700900124",
        status="answered",
        duration=3,
        recording=fresh_name,
        recording_seconds=0.5,
    )
    Recording.objects.filter(call_id=voicemail.pk).update(
        created_at=timezone.now() - timedelta(days=31)
    )

    call_command("purge_expired")

    old = record_get(pk=voicemail.pk)
    assert (old.recording, old.recording_seconds) == ("", None)
    assert not recordings_storage().exists(voicemail.recording)
    assert recordings_storage().exists(fresh_name)
    assert record_get(pk=fresh.pk).recording == fresh_name


def test_retention_deletes_files_no_record_names_once_they_are_an_hour_old():
    storage = recordings_storage()
    stray = storage.save("stray.wav", ContentFile(wav_bytes(0.1)))
    new = storage.save("just-saved.wav", ContentFile(wav_bytes(0.1)))
    old = (timezone.now() - timedelta(hours=2)).timestamp()
    os.utime(storage.path(stray), (old, old))

    call_command("purge_expired")

    assert not storage.exists(stray)
    assert storage.exists(new)  # an agent may be about to record it
    storage.delete(new)
