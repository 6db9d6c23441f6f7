"""The hours page and a closed greeting recorded by phone (issue 57, the mailbox's 4): shown
and played through the session, removed (POST, CSRF) through
number_greeting_recording_remove(closed=True); an outsider gets the not-found page."""

import pytest
from django.core.files.base import ContentFile

from core.recordings import recordings_storage
from tests.factories import NumberFactory, wav_bytes
from virtual_numbers import services
from virtual_numbers.models import GREETING_PREFIX, OpeningHours

pytestmark = pytest.mark.django_db(transaction=True)


def recorded_hours(owner, seconds: float = 1.5) -> OpeningHours:
    number = NumberFactory(owner=owner, alias="Shop")
    hours = OpeningHours.objects.create(
        number=number, time_zone="UTC", closed_greeting="We are closed."
    )
    name = recordings_storage().save(
        f"{GREETING_PREFIX}console-closed.wav", ContentFile(wav_bytes(seconds))
    )
    services.number_greeting_recording_set(number=number, name=name, seconds=seconds, closed=True)
    hours.refresh_from_db()
    return hours


@pytest.fixture
def hours(user):
    return recorded_hours(user)


def test_the_page_shows_and_plays_the_recorded_closed_greeting(browser_client, hours):
    number = hours.number
    page = browser_client.get(f"/numbers/{number.pk}/hours").content.decode()

    assert "callers hear the greeting recorded by phone (1.5 s)" in page
    src = f"/numbers/{number.pk}/hours/closed-greeting"
    assert f'<audio controls preload="none" src="{src}"' in page
    assert f'action="/numbers/{number.pk}/hours/closed-greeting/remove"' in page
    response = browser_client.get(src)
    assert (response.status_code, response["Cache-Control"]) == (200, "private, no-store")
    assert b"".join(response.streaming_content)[:4] == b"RIFF"


def test_hours_with_nothing_recorded_say_how_to_record_one(browser_client, user):
    number = NumberFactory(owner=user)
    OpeningHours.objects.create(number=number, time_zone="UTC")

    page = browser_client.get(f"/numbers/{number.pk}/hours").content.decode()

    assert "Nothing recorded." in page and "then press 4" in page
    assert "<audio" not in page


def test_the_remove_button_deletes_the_file_and_keeps_the_hours(browser_client, hours):
    number, name = hours.number, hours.closed_greeting_recording

    response = browser_client.post(
        f"/numbers/{number.pk}/hours/closed-greeting/remove", follow=True
    )

    assert response.redirect_chain == [(f"/numbers/{number.pk}/hours", 302)]
    assert "hear the spoken closed greeting again." in response.content.decode()
    stored = OpeningHours.objects.get(pk=hours.pk)
    assert (stored.closed_greeting_recording, stored.closed_greeting) == ("", "We are closed.")
    assert not recordings_storage().exists(name)
    again = browser_client.post(f"/numbers/{number.pk}/hours/closed-greeting/remove", follow=True)
    assert f"{number.number} has no recorded closed greeting." in again.content.decode()


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "hours/closed-greeting"), ("post", "hours/closed-greeting/remove")],
)
def test_another_users_number_is_the_not_found_page(browser_client, other_user, method, path):
    theirs = recorded_hours(other_user)

    response = getattr(browser_client, method)(f"/numbers/{theirs.number_id}/{path}")

    assert response.status_code == 404
    assert recordings_storage().exists(theirs.closed_greeting_recording)


def test_the_remove_button_enforces_csrf(csrf_client, hours):
    response = csrf_client.post(f"/numbers/{hours.number_id}/hours/closed-greeting/remove")

    assert response.status_code == 403
    assert OpeningHours.objects.get(pk=hours.pk).closed_greeting_recording
