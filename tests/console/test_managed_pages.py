"""The console's pages of how a shared number takes calls (its ring list, greeting, opening
hours and music on hold, and the recorded greetings) let its managers in, as the API does
(tests/numbers/test_managed_settings.py), and show a member the 404 page; a manager's card on
the numbers page links them."""

import pytest
from django.test import Client

from tests.console.conftest import sign_in
from tests.factories import NumberFactory, NumberMemberFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


def client_of(user) -> Client:
    client = Client()
    sign_in(client, user)
    return client


@pytest.mark.parametrize(
    ("role", "status"), [("manager", 200), ("member", 404)], ids=["manager", "member"]
)
def test_the_pages_let_a_manager_in(number, role, status):
    client = client_of(NumberMemberFactory(number=number, role=role).user)

    for page in ("greeting", "hours", "ringing", "hold-music"):
        assert client.get(f"/numbers/{number.pk}/{page}").status_code == status, page


def test_a_managers_card_links_its_settings(number):
    client = client_of(NumberMemberFactory(number=number, role="manager").user)

    page = client.get("/numbers").content.decode()

    for page_path in ("ringing", "greeting", "hours", "hold-music"):
        assert f'href="/numbers/{number.pk}/{page_path}"' in page
