"""The console's ring list page (/numbers/<id>/ringing, issue 57): entries added, moved and
removed through RingingInput and number_ringing_set; the owner and managers only (a member or
anyone else: the 404 page), CSRF, signed out."""

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
    return f"/numbers/{number.pk}/ringing"


def entries_of(number) -> list:
    return Number.objects.get(pk=number.pk).ring_entries


def client_of(user) -> Client:
    client = Client()
    sign_in(client, user)
    return client


def add(client, number, target, seconds=""):
    return client.post(page_of(number), {"action": "add", "target": target, "ringSeconds": seconds})


def test_entries_are_added_in_order_and_moved(browser_client, user, number):
    assert "The list is empty" in browser_client.get(page_of(number)).content.decode()
    for target in ("+447400123456", "sip:desk@pbx.example.com", user.email.upper()):
        assert add(browser_client, number, target).status_code == 302

    browser_client.post(page_of(number), {"action": "up", "index": "2"})
    browser_client.post(page_of(number), {"action": "down", "index": "0"})

    # up: the owner's entry goes second; down: the phone goes second, after it
    assert entries_of(number) == [
        {"member": str(user.pk)},
        {"phone": "+447400123456"},
        {"sip": "sip:desk@pbx.example.com"},
    ]
    browser_client.post(page_of(number), {"action": "remove", "index": "1"})
    response = browser_client.post(
        page_of(number),
        {"action": "settings", "strategy": "in_order", "ringSeconds": "30", "screening": "on"},
    )
    assert response.status_code == 302
    stored = Number.objects.get(pk=number.pk)
    assert (stored.ring_strategy, stored.forward_ring_seconds, stored.forward_screening) == (
        "in_order",
        30,
        True,
    )
    assert len(stored.ring_entries) == 2


@pytest.mark.parametrize(
    ("target", "seconds", "says"),
    [
        ("07400 123456", "", "E.164"),
        ("sip:desk@10.0.0.7", "", "private or local address"),
        ("stranger@example.com", "", "Not the owner nor a member"),
        ("+447400123456", "90", "less than or equal to 60"),
        ("+447400123456\x00", "", "E.164"),
    ],
)
def test_a_refused_entry_is_shown_on_its_field_and_nothing_is_stored(
    browser_client, number, target, seconds, says
):
    response = add(browser_client, number, target, seconds)

    assert response.status_code == 400
    assert says in response.content.decode()
    assert entries_of(number) == []


def test_a_bad_setting_is_a_notice_and_nothing_is_stored(browser_client, number):
    add(browser_client, number, "+447400123456")

    response = browser_client.post(
        page_of(number),
        {"action": "settings", "strategy": "random", "ringSeconds": "20"},
        follow=True,
    )

    assert "Nothing was changed" in response.content.decode()
    assert Number.objects.get(pk=number.pk).ring_strategy == "all"


def test_a_manager_changes_it_and_a_member_or_outsider_gets_the_404_page(number, other_user):
    manager = NumberMemberFactory(number=number, role="manager")
    member = NumberMemberFactory(number=number, role="member")

    assert add(client_of(manager.user), number, "+447400123456").status_code == 302
    for who in (member.user, other_user):
        client = client_of(who)
        assert client.get(page_of(number)).status_code == 404
        assert add(client, number, "+447400123457").status_code == 404
    assert entries_of(number) == [{"phone": "+447400123456"}]


def test_the_page_needs_a_signed_in_user_and_a_csrf_token(client, csrf_client, number):
    assert client.get(page_of(number)).status_code == 302  # to the login page
    assert add(csrf_client, number, "+447400123456").status_code == 403
    assert entries_of(number) == []
