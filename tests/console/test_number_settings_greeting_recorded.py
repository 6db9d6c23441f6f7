"""The greeting page and a greeting recorded by phone (issue 44): which greeting is active,
the recording played through the session, and its removal (POST, CSRF) through
number_greeting_recording_remove; an outsider gets the not-found page."""

import pytest
from django.core.files.base import ContentFile
from django.test import Client

from core.recordings import recordings_storage
from tests.factories import NumberFactory, wav_bytes
from virtual_numbers import services
from virtual_numbers.models import GREETING_PREFIX, Number

pytestmark = pytest.mark.django_db(transaction=True)


def recorded_number(owner, seconds: float = 1.5) -> Number:
    number = NumberFactory(owner=owner, alias="Shop", greeting="Leave a message.")
    name = recordings_storage().save(
        f"{GREETING_PREFIX}console-test.wav", ContentFile(wav_bytes(seconds))
    )
    return services.number_greeting_recording_set(number=number, name=name, seconds=seconds)


@pytest.fixture
def number(user):
    return recorded_number(user)


def test_the_page_says_the_recorded_greeting_is_active_and_plays_it(browser_client, number):
    page = browser_client.get(f"/numbers/{number.pk}/greeting").content.decode()

    assert "Callers hear the greeting recorded by phone" in page
    assert "(1.5 s)" in page
    assert f'<audio controls preload="none" src="/numbers/{number.pk}/greeting/recording"' in page
    assert f'action="/numbers/{number.pk}/greeting/recording/remove"' in page
    assert "Leave a message.</textarea>" in page  # the text stays, for when it is removed


def test_a_page_with_nothing_recorded_says_how_to_record_one(browser_client, user):
    plain = NumberFactory(owner=user)

    page = browser_client.get(f"/numbers/{plain.pk}/greeting").content.decode()

    assert "Callers hear the default greeting" in page
    assert "Nothing recorded." in page and "then press 3" in page
    assert "<audio" not in page and "Remove the recorded greeting" not in page


def test_the_recording_plays_to_its_owner_never_cached(browser_client, number):
    response = browser_client.get(f"/numbers/{number.pk}/greeting/recording")

    assert response.status_code == 200
    assert response["Content-Type"] == "audio/wav"
    assert response["Cache-Control"] == "private, no-store"
    assert b"".join(response.streaming_content)[:4] == b"RIFF"


def test_the_remove_button_brings_the_text_back_and_deletes_the_file(browser_client, number):
    name = number.greeting_recording

    response = browser_client.post(f"/numbers/{number.pk}/greeting/recording/remove", follow=True)

    assert response.redirect_chain == [(f"/numbers/{number.pk}/greeting", 302)]
    page = response.content.decode()
    assert f"Callers to {number.number} hear the spoken greeting again." in page
    assert "Callers hear the greeting below." in page and "<audio" not in page
    assert Number.objects.get(pk=number.pk).greeting_recording == ""
    assert not recordings_storage().exists(name)
    assert browser_client.get(f"/numbers/{number.pk}/greeting/recording").status_code == 404


def test_removing_twice_is_a_notice(browser_client, number):
    browser_client.post(f"/numbers/{number.pk}/greeting/recording/remove")

    response = browser_client.post(f"/numbers/{number.pk}/greeting/recording/remove", follow=True)

    assert response.status_code == 200
    assert f"{number.number} has no recorded greeting." in response.content.decode()


def test_a_get_of_the_remove_address_removes_nothing(browser_client, number):
    response = browser_client.get(f"/numbers/{number.pk}/greeting/recording/remove")

    assert (response.status_code, response.url) == (302, f"/numbers/{number.pk}/greeting")
    assert Number.objects.get(pk=number.pk).greeting_recording == number.greeting_recording


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "greeting"),
        ("get", "greeting/recording"),
        ("post", "greeting/recording/remove"),
    ],
)
def test_another_users_number_is_the_not_found_page(browser_client, other_user, method, path):
    theirs = recorded_number(other_user)

    response = getattr(browser_client, method)(f"/numbers/{theirs.pk}/{path}")

    assert response.status_code == 404
    assert Number.objects.get(pk=theirs.pk).greeting_recording == theirs.greeting_recording
    assert recordings_storage().exists(theirs.greeting_recording)


def test_the_remove_button_enforces_csrf(csrf_client, number):
    response = csrf_client.post(f"/numbers/{number.pk}/greeting/recording/remove")

    assert response.status_code == 403
    assert Number.objects.get(pk=number.pk).greeting_recording == number.greeting_recording


def test_a_signed_out_browser_cannot_play_it(number):
    response = Client().get(f"/numbers/{number.pk}/greeting/recording")

    assert response.status_code == 302
    assert response.url.startswith("/login?next=")
