"""The greeting page: set and restore the default through GreetingInput and
number_greeting_set; each refusal by the field, outsider, CSRF, signed out."""

import pytest
from django.test import Client

from tests.factories import NumberFactory
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def page_of(number) -> str:
    return f"/numbers/{number.pk}/greeting"


def greeting_of(number) -> str:
    return Number.objects.get(pk=number.pk).greeting


def test_the_page_says_the_default_is_used_and_how_to_get_it_back(browser_client, number):
    page = browser_client.get(page_of(number)).content.decode()

    assert "Callers hear the default greeting" in page
    assert "Leave it empty to use the default greeting." in page
    assert 'aria-describedby="id_greeting_helptext"' in page


def test_saving_a_greeting_stores_it_trimmed_and_shows_it(browser_client, number):
    response = browser_client.post(page_of(number), {"greeting": "  Leave a message.  "})

    assert response.status_code == 302 and response.url == "/numbers"
    assert greeting_of(number) == "Leave a message."
    page = browser_client.get(page_of(number)).content.decode()
    assert "Leave a message.</textarea>" in page and "Callers hear the greeting below" in page


def test_an_empty_greeting_restores_the_default(browser_client, number):
    Number.objects.filter(pk=number.pk).update(greeting="Old words.")

    response = browser_client.post(page_of(number), {"greeting": "  "}, follow=True)

    assert greeting_of(number) == ""
    assert "hear the default greeting" in response.content.decode()


def test_500_characters_are_taken(browser_client, number):
    response = browser_client.post(page_of(number), {"greeting": "a" * 500})

    assert response.status_code == 302
    assert greeting_of(number) == "a" * 500


@pytest.mark.parametrize(
    ("greeting", "sentence"),
    [
        ("a" * 501, "Must be at most 500 characters after trimming."),
        ("a\x00b", "Must not contain control characters."),
        ("ring\x07bell", "Must not contain control characters."),
    ],
)
def test_a_bad_greeting_is_refused_next_to_the_field(browser_client, number, greeting, sentence):
    Number.objects.filter(pk=number.pk).update(greeting="Old words.")

    response = browser_client.post(page_of(number), {"greeting": greeting})

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="id_greeting_errors"' in page and sentence in page
    assert 'aria-describedby="id_greeting_errors id_greeting_helptext"' in page
    assert greeting_of(number) == "Old words."


def test_bytes_that_are_no_utf8_are_kept_replaced_never_a_500(browser_client, number):
    # A lone surrogate cannot be sent as UTF-8: what arrives is bytes Django decodes replaced.
    response = browser_client.post(
        page_of(number), "greeting=Hi%ED%A0%80", content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 302
    assert greeting_of(number) == "Hi\ufffd\ufffd\ufffd"


@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_number_is_the_not_found_page(browser_client, other_user, method):
    theirs = NumberFactory(owner=other_user, greeting="Theirs.")

    response = getattr(browser_client, method)(f"/numbers/{theirs.pk}/greeting", {"greeting": ""})

    assert response.status_code == 404 and "Not found" in response.content.decode()
    assert greeting_of(theirs) == "Theirs."


def test_the_greeting_form_enforces_csrf(csrf_client, number):
    response = csrf_client.post(page_of(number), {"greeting": "Stolen."})

    assert response.status_code == 403
    assert greeting_of(number) == ""


def test_a_signed_out_browser_is_sent_to_log_in(number):
    response = Client().get(page_of(number))

    assert response.status_code == 302
    assert response.url == f"/login?next=/numbers/{number.pk}/greeting"


def test_each_number_card_links_its_three_settings_pages(browser_client, number):
    page = browser_client.get("/numbers").content.decode()

    for path, text in [("blocked", "Blocked callers"), ("forwarding", "Forwarding")]:
        assert f'href="/numbers/{number.pk}/{path}">{text}' in page
    assert f'href="/numbers/{number.pk}/greeting">Greeting' in page
    assert f'<span class="visually-hidden"> of {number.number}</span>' in page
