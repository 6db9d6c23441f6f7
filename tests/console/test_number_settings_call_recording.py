"""The call recording page of a number (issue 58): recording turned on with the owner's
announcement, or the default, and off again, through RecordingInput and
number_recording_set; a bad announcement refused on its field; the owner's alone (a member,
a manager and anyone else get the 404 page); CSRF; signed out."""

import pytest
from django.test import Client

from tests.console.conftest import sign_in
from tests.factories import NumberFactory, NumberMemberFactory
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def page_of(number) -> str:
    return f"/numbers/{number.pk}/recording"


def stored(number) -> tuple[bool, str]:
    fresh = Number.objects.get(pk=number.pk)
    return fresh.recording_enabled, fresh.recording_announce


def test_the_page_says_recording_is_off_and_why_the_announcement_is_always_on(
    browser_client, number
):
    response = browser_client.get(page_of(number))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Forwarded calls are not recorded." in page
    assert "Record this number&#x27;s forwarded calls" in page
    assert "differs from country to country" in page
    assert 'aria-describedby="id_announce_helptext"' in page
    assert '<input type="checkbox" name="enabled" id="id_enabled">' in page


def test_turning_it_on_with_an_announcement_stores_it_trimmed_and_says_so(browser_client, number):
    response = browser_client.post(
        page_of(number), {"enabled": "on", "announce": "  Calls to the shop are recorded.  "}
    )

    assert response.status_code == 302 and response.url == page_of(number)
    assert stored(number) == (True, "Calls to the shop are recorded.")
    page = browser_client.get(page_of(number)).content.decode()
    assert f"Forwarded calls to {number.number} are recorded." in page
    assert "both parties hear: &ldquo;Calls to the shop are recorded.&rdquo;" in page
    assert '<input type="checkbox" name="enabled" id="id_enabled" checked>' in page
    assert "Calls to the shop are recorded.</textarea>" in page


def test_an_empty_announcement_is_the_default_one(browser_client, number):
    Number.objects.filter(pk=number.pk).update(recording_announce="Old words.")

    browser_client.post(page_of(number), {"enabled": "on", "announce": "   "})

    assert stored(number) == (True, "")
    page = browser_client.get(page_of(number)).content.decode()
    assert "both parties hear: &ldquo;This call may be recorded.&rdquo;" in page


def test_turning_it_off_keeps_nothing_on(browser_client, number):
    Number.objects.filter(pk=number.pk).update(recording_enabled=True)

    response = browser_client.post(page_of(number), {"announce": ""}, follow=True)

    assert stored(number) == (False, "")
    assert "are not recorded." in response.content.decode()


def test_500_characters_are_taken(browser_client, number):
    response = browser_client.post(page_of(number), {"enabled": "on", "announce": "a" * 500})

    assert response.status_code == 302
    assert stored(number) == (True, "a" * 500)


@pytest.mark.parametrize(
    ("announce", "sentence"),
    [
        ("a" * 501, "Must be at most 500 characters after trimming."),
        ("a\x00b", "Must not contain control characters."),
    ],
)
def test_a_bad_announcement_is_refused_on_its_field(browser_client, number, announce, sentence):
    response = browser_client.post(page_of(number), {"enabled": "on", "announce": announce})

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="id_announce_errors"' in page and sentence in page
    assert 'aria-describedby="id_announce_errors id_announce_helptext"' in page
    assert stored(number) == (False, "")


@pytest.mark.parametrize("role", ["member", "manager"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_a_member_or_manager_gets_the_not_found_page(other_user, number, role, method):
    NumberMemberFactory(number=number, user=other_user, role=role)
    client = Client()
    sign_in(client, other_user)

    response = getattr(client, method)(page_of(number), {"enabled": "on", "announce": "Mine."})

    assert response.status_code == 404 and "Not found" in response.content.decode()
    assert stored(number) == (False, "")


@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_number_is_the_not_found_page(browser_client, other_user, method):
    theirs = NumberFactory(owner=other_user)

    response = getattr(browser_client, method)(page_of(theirs), {"enabled": "on"})

    assert response.status_code == 404 and "Not found" in response.content.decode()
    assert stored(theirs) == (False, "")


def test_the_form_enforces_csrf(csrf_client, number):
    response = csrf_client.post(page_of(number), {"enabled": "on"})

    assert response.status_code == 403
    assert stored(number) == (False, "")


def test_a_signed_out_browser_is_sent_to_log_in(number):
    response = Client().get(page_of(number))

    assert response.status_code == 302
    assert response.url == f"/login?next={page_of(number)}"


def test_the_owners_card_links_the_page_and_a_members_does_not(browser_client, other_user, number):
    NumberMemberFactory(number=number, user=other_user, role="manager")
    page = browser_client.get("/numbers").content.decode()
    assert f'href="{page_of(number)}">Call recording' in page

    client = Client()
    sign_in(client, other_user)
    shared = client.get("/numbers").content.decode()
    assert number.number in shared and page_of(number) not in shared
