"""A number's music on hold (issue 58) over REST: a WAV file uploaded with PUT
/api/numbers/:id/hold-music, kept converted to 8 kHz, 16-bit, mono, downloaded and removed by
its owner and nobody else, refused with a clear error when it is not a WAV file, too long,
too big or sent as something else, its file going with its number and its owner, and in the
owner's export. What a held call plays is tested live in tests/telephony/test_hold.py."""

import io
import json
import wave
import zipfile

import pytest

from core.recordings import recordings_storage
from tests.factories import DEFAULT_PASSWORD, NumberFactory, NumberMemberFactory, music_wav
from virtual_numbers.models import HOLD_MUSIC_PREFIX, Number

pytestmark = pytest.mark.django_db(transaction=True)


def url(number) -> str:
    return f"/api/numbers/{number.pk}/hold-music"


def upload(client, number, body: bytes, content_type: str = "audio/wav"):
    return client.put(url(number), data=body, content_type=content_type)


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


@pytest.fixture
def uploaded(client_jwt, number):
    """`number` with 2 s of music uploaded."""
    assert upload(client_jwt, number, music_wav()).status_code == 200
    number.refresh_from_db()
    return number


def test_the_owner_uploads_a_wav_and_it_is_kept_at_8_khz_mono(client_jwt, number):
    response = upload(client_jwt, number, music_wav(2.0, rate=22050, channels=2))

    assert response.status_code == 200, response.content
    assert response.json() == {"url": url(number), "seconds": 2.0}
    number.refresh_from_db()
    assert number.hold_music.startswith(HOLD_MUSIC_PREFIX)
    assert number.hold_music_seconds == 2.0
    with recordings_storage().open(number.hold_music, "rb") as stored, wave.open(stored) as audio:
        shape = (audio.getframerate(), audio.getsampwidth(), audio.getnchannels())
        assert (shape, audio.getnframes()) == ((8000, 2, 1), 16000)


@pytest.mark.parametrize("content_type", ["audio/x-wav", "audio/wave", "audio/vnd.wave"])
def test_every_name_of_the_wav_type_is_taken(client_jwt, number, content_type):
    assert upload(client_jwt, number, music_wav(0.5), content_type).status_code == 200


def test_the_owner_downloads_it(client_jwt, uploaded):
    response = client_jwt.get(url(uploaded), HTTP_ACCEPT="audio/*")

    assert response.status_code == 200
    assert response["Content-Type"] == "audio/wav"
    assert "no-store" in response["Cache-Control"]
    with recordings_storage().open(uploaded.hold_music, "rb") as stored:
        assert b"".join(response.streaming_content) == stored.read()


def test_uploading_again_replaces_the_file(client_jwt, uploaded):
    old = uploaded.hold_music

    response = upload(client_jwt, uploaded, music_wav(1.0))

    assert response.json()["seconds"] == 1.0
    uploaded.refresh_from_db()
    assert uploaded.hold_music != old
    assert recordings_storage().exists(uploaded.hold_music)
    assert not recordings_storage().exists(old)


def test_removing_it_deletes_the_file(client_jwt, uploaded):
    name = uploaded.hold_music

    assert client_jwt.delete(url(uploaded)).json() == {"success": True}

    uploaded.refresh_from_db()
    assert (uploaded.hold_music, uploaded.hold_music_seconds) == ("", None)
    assert not recordings_storage().exists(name)
    assert client_jwt.get(url(uploaded)).status_code == 404


@pytest.mark.parametrize("method", ["get", "delete"])
def test_none_uploaded_is_not_found(client_jwt, number, method):
    response = getattr(client_jwt, method)(url(number))

    assert (response.status_code, response.json()["code"]) == (404, "not_found")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"just some text, no audio", id="text"),
        pytest.param(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00garbage" * 4, id="bad-header"),
        pytest.param(json.dumps({"file": "music.wav"}).encode(), id="json"),
        pytest.param(b"", id="empty"),
    ],
)
def test_a_body_that_is_not_a_wav_file_is_refused(client_jwt, number, body):
    response = upload(client_jwt, number, body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["fields"]) == ["file"]
    assert Number.objects.get(pk=number.pk).hold_music == ""


def test_a_wav_file_with_no_audio_is_refused(client_jwt, number):
    response = upload(client_jwt, number, music_wav(0.0))

    assert response.status_code == 400
    assert response.json()["fields"]["file"] == ["The WAV file holds no audio."]


def test_music_longer_than_the_setting_is_refused(client_jwt, number, settings):
    settings.HOLD_MUSIC_MAX_SECONDS = 1.5

    response = upload(client_jwt, number, music_wav(2.0, rate=8000, channels=1))

    assert response.status_code == 400
    assert response.json()["fields"]["file"] == ["Longer than 1.5 seconds."]
    assert Number.objects.get(pk=number.pk).hold_music == ""


def test_a_file_larger_than_the_setting_is_413(client_jwt, number, settings):
    settings.HOLD_MUSIC_MAX_BYTES = 10_000

    response = upload(client_jwt, number, music_wav(1.0))

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert Number.objects.get(pk=number.pk).hold_music == ""


def test_a_wav_file_larger_than_a_json_body_is_taken(client_jwt, number, settings):
    # 2 s at 22.05 kHz, stereo: about 176 KB, past API_MAX_BODY_BYTES (64 KiB)
    assert len(music_wav(2.0)) > settings.API_MAX_BODY_BYTES

    assert upload(client_jwt, number, music_wav(2.0)).status_code == 200


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/octet-stream", "text/plain", "audio/mpeg"]
)
def test_another_content_type_is_415(client_jwt, number, content_type):
    response = upload(client_jwt, number, music_wav(0.5), content_type)

    assert response.status_code == 415
    assert response.json() == {
        "error": "Send the music as a WAV file (Content-Type: audio/wav).",
        "code": "unsupported_media_type",
    }


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_another_users_number_is_not_found(outsider, client_jwt, uploaded, method):
    name = uploaded.hold_music
    if method == "put":
        response = upload(outsider, uploaded, music_wav(0.5))
    else:
        response = getattr(outsider, method)(url(uploaded))

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert Number.objects.get(pk=uploaded.pk).hold_music == name
    assert recordings_storage().exists(name)


def test_a_member_of_the_number_is_refused_and_changes_nothing(uploaded, api_client):
    # as they may not change its greeting or hours (tests/numbers/test_managed_settings.py)
    name = uploaded.hold_music
    api_client.force_authenticate(NumberMemberFactory(number=uploaded).user)

    assert upload(api_client, uploaded, music_wav(0.5)).status_code == 403
    assert api_client.get(url(uploaded)).status_code == 403
    assert api_client.delete(url(uploaded)).json()["code"] == "permission_denied"
    assert Number.objects.get(pk=uploaded.pk).hold_music == name


def test_a_manager_of_the_number_uploads_downloads_and_removes_it(number, api_client):
    api_client.force_authenticate(NumberMemberFactory(number=number, role="manager").user)

    assert upload(api_client, number, music_wav(0.5)).json() == {"url": url(number), "seconds": 0.5}
    assert api_client.get(url(number)).status_code == 200
    assert api_client.delete(url(number)).status_code == 200
    assert Number.objects.get(pk=number.pk).hold_music == ""


def test_without_credentials_it_is_401(api_client, number):
    assert upload(api_client, number, music_wav(0.5)).status_code == 401


def test_deleting_the_number_deletes_it(client_jwt, uploaded):
    name = uploaded.hold_music

    assert client_jwt.delete(f"/api/numbers/{uploaded.pk}").status_code == 200

    assert not recordings_storage().exists(name)


def test_deleting_the_account_deletes_it(client_jwt, uploaded):
    name = uploaded.hold_music

    response = client_jwt.delete("/api/user/me", {"password": DEFAULT_PASSWORD}, format="json")

    assert response.status_code == 204
    assert not recordings_storage().exists(name)


def test_the_export_holds_it(client_jwt, uploaded, user):
    NumberFactory(owner=user)  # a number without music: named null
    response = client_jwt.get("/api/user/export")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    numbers = json.loads(archive.read("account.json"))["numbers"]

    [with_music] = [n for n in numbers if n["id"] == str(uploaded.pk)]
    [without] = [n for n in numbers if n["id"] != str(uploaded.pk)]
    assert with_music["hold_music_file"] == f"hold-music/{uploaded.pk}.wav"
    assert with_music["hold_music_seconds"] == 2.0
    assert (without["hold_music_file"], without["hold_music_seconds"]) == (None, None)
    with recordings_storage().open(uploaded.hold_music, "rb") as stored:
        assert archive.read(with_music["hold_music_file"]) == stored.read()
