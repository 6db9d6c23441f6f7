"""A closed greeting recorded by phone (issue 57, the mailbox's 4) over REST: shown with the
hours, downloaded by whoever may change the hours and nobody else, removed alone or with the
hours, its file going with its number and its owner, and in the owner's export. The mailbox
that records it is tested live in tests/telephony/test_greeting_by_phone.py."""

import io
import json
import zipfile

import pytest
from django.core.files.base import ContentFile

from core.errors import NotFound
from core.recordings import recordings_storage
from tests.factories import DEFAULT_PASSWORD, NumberFactory, NumberMemberFactory, wav_bytes
from virtual_numbers import services
from virtual_numbers.models import GREETING_PREFIX, OpeningHours

pytestmark = pytest.mark.django_db(transaction=True)


def saved_greeting(seconds: float = 1.0) -> str:
    return recordings_storage().save(
        f"{GREETING_PREFIX}closed-test.wav", ContentFile(wav_bytes(seconds))
    )


@pytest.fixture
def hours(user):
    """Opening hours of one of `user`'s numbers, with a spoken closed greeting."""
    number = NumberFactory(owner=user)
    return OpeningHours.objects.create(
        number=number, time_zone="UTC", closed_greeting="We are closed."
    )


@pytest.fixture
def recorded(hours):
    """`hours` with a 1.5 s closed greeting recorded on top of the spoken one."""
    services.number_greeting_recording_set(
        number=hours.number, name=saved_greeting(1.5), seconds=1.5, closed=True
    )
    hours.refresh_from_db()
    return hours


def url(hours, path: str = "hours/closed-greeting") -> str:
    return f"/api/numbers/{hours.number_id}/{path}"


def test_the_hours_link_the_recorded_closed_greeting(client_jwt, recorded):
    body = client_jwt.get(url(recorded, "hours")).json()

    assert body["closedGreetingRecordingUrl"] == url(recorded)
    assert body["closedGreetingRecordingSeconds"] == 1.5
    assert body["closedGreeting"] == "We are closed."  # kept, for when it is removed


def test_the_owner_downloads_it(client_jwt, recorded):
    response = client_jwt.get(url(recorded))

    assert response.status_code == 200
    assert response["Content-Type"] == "audio/wav"
    assert (
        response["Cache-Control"].startswith("no-store") or "no-store" in response["Cache-Control"]
    )
    with recordings_storage().open(recorded.closed_greeting_recording, "rb") as stored:
        assert b"".join(response.streaming_content) == stored.read()


def test_a_member_of_the_number_may_not_download_nor_remove_it(recorded, api_client):
    # as they may not read or change the hours (the owner and managers may:
    # tests/numbers/test_managed_settings.py)
    api_client.force_authenticate(NumberMemberFactory(number=recorded.number).user)

    assert api_client.get(url(recorded)).status_code == 403
    assert api_client.delete(url(recorded)).status_code == 403
    assert recordings_storage().exists(recorded.closed_greeting_recording)


def test_removing_it_deletes_the_file_and_keeps_the_hours(client_jwt, recorded):
    name = recorded.closed_greeting_recording

    response = client_jwt.delete(url(recorded))

    assert response.status_code == 200
    stored = OpeningHours.objects.get(pk=recorded.pk)
    assert (stored.closed_greeting_recording, stored.closed_greeting_recording_seconds) == (
        "",
        None,
    )
    assert stored.closed_greeting == "We are closed."
    assert not recordings_storage().exists(name)
    assert client_jwt.get(url(recorded)).status_code == 404


@pytest.mark.parametrize("method", ["get", "delete"])
def test_nothing_recorded_is_not_found(client_jwt, hours, method):
    response = getattr(client_jwt, method)(url(hours))

    assert (response.status_code, response.json()["code"]) == (404, "not_found")


@pytest.mark.parametrize("method", ["get", "delete"])
def test_a_number_without_hours_has_none(client_jwt, user, method):
    number = NumberFactory(owner=user)

    response = getattr(client_jwt, method)(f"/api/numbers/{number.pk}/hours/closed-greeting")

    assert (response.status_code, response.json()["code"]) == (404, "not_found")


@pytest.mark.parametrize("method", ["get", "delete"])
def test_another_users_number_is_not_found(outsider, recorded, method):
    response = getattr(outsider, method)(url(recorded))

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert recordings_storage().exists(recorded.closed_greeting_recording)


def test_recording_without_hours_is_refused_and_the_file_deleted(user):
    number = NumberFactory(owner=user)
    name = saved_greeting()

    with pytest.raises(NotFound):
        services.number_greeting_recording_set(number=number, name=name, seconds=1.0, closed=True)

    assert not recordings_storage().exists(name)
    assert number.greeting_recording == ""  # the usual greeting is not touched


def test_recording_again_replaces_the_file(recorded):
    old = recorded.closed_greeting_recording
    new = saved_greeting(0.5)

    services.number_greeting_recording_set(
        number=recorded.number, name=new, seconds=0.5, closed=True
    )

    stored = OpeningHours.objects.get(pk=recorded.pk)
    assert (stored.closed_greeting_recording, stored.closed_greeting_recording_seconds) == (
        new,
        0.5,
    )
    assert not recordings_storage().exists(old)


def test_putting_new_hours_keeps_it_and_removing_the_hours_deletes_it(client_jwt, recorded):
    name = recorded.closed_greeting_recording
    body = {"timeZone": "Europe/London", "doNotDisturb": True}

    assert client_jwt.put(url(recorded, "hours"), body, format="json").status_code == 200
    assert OpeningHours.objects.get(pk=recorded.pk).closed_greeting_recording == name
    assert client_jwt.delete(url(recorded, "hours")).status_code == 204

    assert not OpeningHours.objects.filter(pk=recorded.pk).exists()
    assert not recordings_storage().exists(name)


def test_deleting_the_number_deletes_it(client_jwt, recorded):
    name = recorded.closed_greeting_recording

    assert client_jwt.delete(f"/api/numbers/{recorded.number_id}").status_code == 200

    assert not recordings_storage().exists(name)


def test_deleting_the_account_deletes_it(client_jwt, recorded):
    name = recorded.closed_greeting_recording

    response = client_jwt.delete("/api/user/me", {"password": DEFAULT_PASSWORD}, format="json")

    assert response.status_code == 204
    assert not recordings_storage().exists(name)


def test_the_export_holds_it(client_jwt, recorded):
    response = client_jwt.get("/api/user/export")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    [number] = json.loads(archive.read("account.json"))["numbers"]

    assert number["closed_greeting_file"] == f"greetings/{recorded.number_id}-closed.wav"
    assert number["greeting_file"] is None
    with recordings_storage().open(recorded.closed_greeting_recording, "rb") as stored:
        assert archive.read(number["closed_greeting_file"]) == stored.read()
