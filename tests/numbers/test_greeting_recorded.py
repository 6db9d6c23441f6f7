"""A greeting recorded by phone (issue 44) over REST: which greeting is active, the recording
to its owner only, its removal, the file going with its number and its owner, kept from the
purge of files no call record names, and in the owner's export."""

import io
import json
import os
import wave
import zipfile
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.utils import timezone

from core.errors import NotFound
from core.recordings import recordings_storage
from tests.factories import DEFAULT_PASSWORD, NumberFactory, wav_bytes
from virtual_numbers import services
from virtual_numbers.models import GREETING_PREFIX, Number

pytestmark = pytest.mark.django_db(transaction=True)


def saved_greeting(seconds: float = 1.0) -> str:
    return recordings_storage().save(
        f"{GREETING_PREFIX}test-greeting.wav", ContentFile(wav_bytes(seconds))
    )


@pytest.fixture
def recorded(user):
    """One of `user`'s numbers with a text greeting and a 1.5 s greeting recorded on top."""
    number = NumberFactory(owner=user, greeting="You reached the shop.")
    return services.number_greeting_recording_set(
        number=number, name=saved_greeting(1.5), seconds=1.5
    )


def greeting_of(client, number):
    return client.get(f"/api/numbers/{number.pk}/greeting")


def test_a_number_with_no_greeting_says_the_default_is_active(user, client_jwt):
    number = NumberFactory(owner=user)

    response = greeting_of(client_jwt, number)

    assert response.status_code == 200
    assert response.json() == {
        "active": "default",
        "greeting": "",
        "recording_url": None,
        "recording_seconds": None,
    }


def test_a_text_greeting_is_active_when_nothing_is_recorded(user, client_key):
    number = NumberFactory(owner=user, greeting="Leave a message.")

    body = greeting_of(client_key, number).json()

    assert (body["active"], body["greeting"], body["recording_url"]) == (
        "text",
        "Leave a message.",
        None,
    )


def test_a_recorded_greeting_is_active_and_links_its_audio(client_jwt, recorded):
    body = greeting_of(client_jwt, recorded).json()

    assert body == {
        "active": "recorded",
        "greeting": "You reached the shop.",
        "recording_url": f"/api/numbers/{recorded.pk}/greeting/recording",
        "recording_seconds": 1.5,
    }


def test_the_owner_downloads_the_recorded_greeting(client_jwt, recorded):
    response = client_jwt.get(
        f"/api/numbers/{recorded.pk}/greeting/recording", HTTP_ACCEPT="audio/*"
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "audio/wav"
    assert response["Accept-Ranges"] == "bytes"
    with wave.open(io.BytesIO(b"".join(response.streaming_content))) as wav:
        assert (wav.getframerate(), wav.getnframes()) == (8000, 12000)


def test_a_byte_range_of_the_greeting_is_answered_with_206(client_jwt, recorded):
    response = client_jwt.get(
        f"/api/numbers/{recorded.pk}/greeting/recording", HTTP_RANGE="bytes=0-43"
    )

    assert response.status_code == 206
    assert b"".join(response.streaming_content)[:4] == b"RIFF"
    assert response["Content-Range"].startswith("bytes 0-43/")


def test_removing_the_recording_brings_the_text_back_and_deletes_the_file(client_jwt, recorded):
    name = recorded.greeting_recording

    response = client_jwt.delete(f"/api/numbers/{recorded.pk}/greeting/recording")

    assert (response.status_code, response.json()) == (200, {"success": True})
    assert greeting_of(client_jwt, recorded).json()["active"] == "text"
    assert not recordings_storage().exists(name)
    fetched = client_jwt.get(f"/api/numbers/{recorded.pk}/greeting/recording")
    assert (fetched.status_code, fetched.json()["code"]) == (404, "not_found")


def test_removing_when_nothing_is_recorded_is_not_found(user, client_jwt):
    number = NumberFactory(owner=user)

    response = client_jwt.delete(f"/api/numbers/{number.pk}/greeting/recording")

    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_a_recording_whose_file_is_gone_is_not_found(client_jwt, recorded):
    recordings_storage().delete(recorded.greeting_recording)

    response = client_jwt.get(
        f"/api/numbers/{recorded.pk}/greeting/recording", HTTP_ACCEPT="audio/*"
    )

    assert (response.status_code, response["Content-Type"]) == (404, "application/json")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "greeting"),
        ("get", "greeting/recording"),
        ("delete", "greeting/recording"),
    ],
)
def test_another_users_number_is_not_found(outsider, recorded, method, path):
    response = getattr(outsider, method)(f"/api/numbers/{recorded.pk}/{path}")

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert Number.objects.get(pk=recorded.pk).greeting_recording == recorded.greeting_recording


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "greeting"), ("get", "greeting/recording"), ("delete", "greeting/recording")],
)
def test_without_credentials_it_is_401(api_client, recorded, method, path):
    response = getattr(api_client, method)(f"/api/numbers/{recorded.pk}/{path}")

    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")


def test_recording_again_replaces_the_file(recorded):
    old = recorded.greeting_recording
    new = saved_greeting(0.5)

    services.number_greeting_recording_set(number=recorded, name=new, seconds=0.5)

    stored = Number.objects.get(pk=recorded.pk)
    assert (stored.greeting_recording, stored.greeting_recording_seconds) == (new, 0.5)
    assert not recordings_storage().exists(old)
    assert recordings_storage().exists(new)


def test_a_greeting_recorded_for_a_number_deleted_meanwhile_is_deleted_too(user):
    number = NumberFactory(owner=user)
    name = saved_greeting()
    Number.objects.filter(pk=number.pk).delete()

    with pytest.raises(NotFound):
        services.number_greeting_recording_set(number=number, name=name, seconds=1.0)

    assert not recordings_storage().exists(name)


def test_a_recording_outside_the_greetings_prefix_is_refused(user):
    number = NumberFactory(owner=user)

    with pytest.raises(ValueError, match="greetings/"):
        services.number_greeting_recording_set(number=number, name="stray.wav", seconds=1.0)

    assert Number.objects.get(pk=number.pk).greeting_recording == ""


def test_deleting_the_number_deletes_its_recorded_greeting(client_jwt, recorded):
    name = recorded.greeting_recording

    assert client_jwt.delete(f"/api/numbers/{recorded.pk}").status_code == 200

    assert not recordings_storage().exists(name)


def test_deleting_the_account_deletes_the_recorded_greeting(client_jwt, user, recorded):
    name = recorded.greeting_recording

    response = client_jwt.delete("/api/user/me", {"password": DEFAULT_PASSWORD}, format="json")

    assert response.status_code == 204
    assert not Number.objects.filter(pk=recorded.pk).exists()
    assert not recordings_storage().exists(name)


def test_the_purge_of_unnamed_files_keeps_recorded_greetings(recorded):
    """history's purge deletes files no call record names once they are an hour old; a
    greeting is named by its number, not a record, and lives under greetings/."""
    storage = recordings_storage()
    old = (timezone.now() - timedelta(hours=2)).timestamp()
    os.utime(storage.path(recorded.greeting_recording), (old, old))
    stray = storage.save("stray-beside-a-greeting.wav", ContentFile(wav_bytes(0.1)))
    os.utime(storage.path(stray), (old, old))

    call_command("purge_expired")

    assert storage.exists(recorded.greeting_recording)
    assert not storage.exists(stray)  # the purge did run


def test_the_export_holds_the_recorded_greeting(client_jwt, recorded):
    response = client_jwt.get("/api/user/export")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    [number] = json.loads(archive.read("account.json"))["numbers"]

    assert number["greeting_file"] == f"greetings/{recorded.pk}.wav"
    with recordings_storage().open(recorded.greeting_recording, "rb") as stored:
        assert archive.read(number["greeting_file"]) == stored.read()
