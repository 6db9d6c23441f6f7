"""The blocklist page: block a caller, unblock one, each refusal, outsider, CSRF, signed out."""

import pytest
from django.test import Client

from tests.factories import BlockedCallerFactory, NumberFactory
from virtual_numbers.models import BlockedCaller

pytestmark = pytest.mark.django_db


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def page_of(number) -> str:
    return f"/numbers/{number.pk}/blocked"


def blocked_on(number) -> list[str]:
    return list(BlockedCaller.objects.filter(number=number).values_list("caller_num", flat=True))


def test_the_page_lists_the_blocked_callers_with_an_unblock_button_each(browser_client, number):
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    page = browser_client.get(page_of(number)).content.decode()

    assert "+447700900123" in page and "blocked since" in page
    assert "Unblock +447700900123" in page
    assert 'name="caller_num" value="+447700900123"' in page


def test_an_empty_blocklist_says_so(browser_client, number):
    page = browser_client.get(page_of(number)).content.decode()

    assert "This number blocks no caller." in page


def test_blocking_a_caller_stores_it_in_e164(browser_client, number):
    response = browser_client.post(page_of(number), {"caller_num": "+44 7700 900123"})

    assert response.status_code == 302 and response.url == page_of(number)
    assert blocked_on(number) == ["+447700900123"]
    followed = browser_client.get(response.url).content.decode()
    assert "+447700900123 is blocked on" in followed


def test_a_caller_blocked_already_is_a_notice_not_an_error(browser_client, number):
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    response = browser_client.post(page_of(number), {"caller_num": "+447700900123"}, follow=True)

    assert response.status_code == 200
    assert "+447700900123 was blocked already." in response.content.decode()
    assert 'class="errors' not in response.content.decode()
    assert blocked_on(number) == ["+447700900123"]


@pytest.mark.parametrize(
    ("caller", "sentence"),
    [
        ("", "This field may not be blank."),
        ("not a number", "Must be a phone number in E.164 form"),
        ("+44", "Must be a phone number in E.164 form"),
        ("1" * 100, "Must be a phone number in E.164 form"),
        ("+4477009\x00123", "Must be a phone number in E.164 form"),
    ],
)
def test_a_bad_caller_number_is_refused_next_to_the_field(browser_client, number, caller, sentence):
    response = browser_client.post(page_of(number), {"caller_num": caller})

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="id_caller_num_errors"' in page and sentence in page
    assert blocked_on(number) == []


def test_a_lone_surrogate_is_refused_as_a_bad_number(browser_client, number):
    # A browser cannot send one; bytes that are no UTF-8 reach the view replaced.
    response = browser_client.post(
        page_of(number), "caller_num=%ED%A0%80", content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 400
    assert "Must be a phone number in E.164 form" in response.content.decode()


def test_a_full_blocklist_is_refused_next_to_the_field(browser_client, number, monkeypatch):
    monkeypatch.setattr("virtual_numbers.services.BLOCKLIST_MAX_PER_NUMBER", 1)
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    response = browser_client.post(page_of(number), {"caller_num": "+447700900124"})

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="id_caller_num_errors"' in page and "can block at most 1 callers" in page
    assert blocked_on(number) == ["+447700900123"]


def test_unblocking_removes_the_caller(browser_client, number):
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    response = browser_client.post(
        f"/numbers/{number.pk}/blocked/remove", {"caller_num": "+447700900123"}, follow=True
    )

    assert response.redirect_chain == [(page_of(number), 302)]
    assert "+447700900123 is unblocked" in response.content.decode()
    assert blocked_on(number) == []


def test_unblocking_a_caller_not_blocked_is_a_notice_on_the_list(browser_client, number):
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    response = browser_client.post(
        f"/numbers/{number.pk}/blocked/remove", {"caller_num": "+447700900999"}, follow=True
    )

    assert response.status_code == 200
    assert "+447700900999 was not blocked on" in response.content.decode()
    assert blocked_on(number) == ["+447700900123"]


@pytest.mark.parametrize("caller", ["junk", "\x00", "9" * 5000])
def test_unblocking_a_malformed_caller_is_refused_on_the_list(browser_client, number, caller):
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    response = browser_client.post(f"/numbers/{number.pk}/blocked/remove", {"caller_num": caller})

    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was unblocked: Must be a phone number in E.164 form" in page
    assert blocked_on(number) == ["+447700900123"]


def test_asking_for_the_remove_address_goes_to_the_list(browser_client, number):
    response = browser_client.get(f"/numbers/{number.pk}/blocked/remove")

    assert response.status_code == 302 and response.url == page_of(number)


@pytest.mark.parametrize("path", ["blocked", "blocked/remove"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_number_is_the_not_found_page(browser_client, other_user, path, method):
    theirs = NumberFactory(owner=other_user)
    BlockedCallerFactory(number=theirs, caller_num="+447700900123")

    response = getattr(browser_client, method)(
        f"/numbers/{theirs.pk}/{path}", {"caller_num": "+447700900123"}
    )

    assert response.status_code == 404 and "Not found" in response.content.decode()
    assert blocked_on(theirs) == ["+447700900123"]


@pytest.mark.parametrize("number_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_a_malformed_or_unknown_id_is_the_not_found_page(browser_client, number_id):
    response = browser_client.get(f"/numbers/{number_id}/blocked")

    assert response.status_code == 404 and "Not found" in response.content.decode()


@pytest.mark.parametrize("path", ["blocked", "blocked/remove"])
def test_the_blocklist_forms_enforce_csrf(csrf_client, number, path):
    BlockedCallerFactory(number=number, caller_num="+447700900123")

    response = csrf_client.post(f"/numbers/{number.pk}/{path}", {"caller_num": "+447700900124"})

    assert response.status_code == 403
    assert blocked_on(number) == ["+447700900123"]


def test_a_signed_out_browser_is_sent_to_log_in(number):
    response = Client().get(page_of(number))

    assert response.status_code == 302
    assert response.url == f"/login?next=/numbers/{number.pk}/blocked"
