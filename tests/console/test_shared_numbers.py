"""A member's console for the numbers shared with them (issue 57): the numbers page shows
each with its role, its calls and the member's notices; the history page filters by a shared
number; the notices page sets the member's own switches and nobody else's."""

import pytest

from history.services import record_inbound_call
from tests.console.conftest import sign_in
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory
from virtual_numbers.models import NumberMember

pytestmark = pytest.mark.django_db

MINE, SHOPS = "+447700900001", "+447700900002"


@pytest.fixture
def shop(user):
    """A number of someone else's, shared with the signed-in user as its member."""
    number = NumberFactory(owner=UserFactory(), alias="Shop")
    return NumberMemberFactory(number=number, user=user, email=user.email)


def test_the_numbers_page_shows_a_shared_number_with_its_role_calls_and_notices(
    browser_client, shop
):
    page = browser_client.get("/numbers").text

    assert "Shared with you" in page and shop.number.number in page
    assert "You are its member since" in page
    assert f'href="/history?number_id={shop.number.pk}"' in page
    assert f'href="/numbers/{shop.number.pk}/notices"' in page
    assert "Your notices besides your open tabs: none" in page


def test_the_history_page_filters_by_a_shared_number(browser_client, user, shop):
    own = NumberFactory(owner=user, alias="Mine")
    record_inbound_call(number=own, caller_num=MINE, status="missed", duration=0)
    record_inbound_call(number=shop.number, caller_num=SHOPS, status="missed", duration=0)

    everything = browser_client.get("/history").text
    shared = browser_client.get("/history", {"number_id": str(shop.number.pk)}).text

    # without a number: the user's own numbers only, as GET /api/history
    assert MINE in everything and SHOPS not in everything
    assert "All your numbers" in everything
    assert '<optgroup label="Shared with you">' in everything
    assert SHOPS in shared and MINE not in shared
    assert f'<option value="{shop.number.pk}" selected>Shop (' in shared


def test_a_member_who_left_or_an_outsider_gets_the_404_page_for_its_calls(client, shop):
    record_inbound_call(number=shop.number, caller_num=SHOPS, status="missed", duration=0)
    outsider = UserFactory()
    sign_in(client, outsider)

    answer = client.get("/history", {"number_id": str(shop.number.pk)})

    assert answer.status_code == 404 and SHOPS not in answer.text
    NumberMember.objects.filter(pk=shop.pk).delete()
    sign_in(client, shop.user)
    assert client.get("/history", {"number_id": str(shop.number.pk)}).status_code == 404
    assert "Shared with you" not in client.get("/history").text


def test_a_member_sets_their_notices_on_its_page(browser_client, shop):
    page = browser_client.get(f"/numbers/{shop.number.pk}/notices")
    saved = browser_client.post(
        f"/numbers/{shop.number.pk}/notices", {"webhook": "on", "voicemailEmail": "on"}
    )

    assert page.status_code == 200
    assert "You have no webhook yet" in page.text
    assert saved.status_code == 302
    shop.refresh_from_db()
    assert (shop.notify_webhook, shop.notify_matrix) == (True, False)
    assert (shop.missed_call_email, shop.voicemail_email) == (False, True)
    again = browser_client.get(f"/numbers/{shop.number.pk}/notices").text
    assert 'name="webhook" id="id_webhook" checked' in again
    listing = browser_client.get("/numbers").text
    assert "Your notices besides your open tabs: webhook, voicemail mail" in listing
    # unchecked boxes turn them off
    browser_client.post(f"/numbers/{shop.number.pk}/notices", {})
    shop.refresh_from_db()
    assert (shop.notify_webhook, shop.voicemail_email) == (False, False)


def test_the_owner_and_an_outsider_get_the_404_page_and_change_nothing(client, shop):
    for someone in (shop.number.owner, UserFactory()):
        sign_in(client, someone)
        assert client.get(f"/numbers/{shop.number.pk}/notices").status_code == 404
        posted = client.post(f"/numbers/{shop.number.pk}/notices", {"webhook": "on"})
        assert posted.status_code == 404
    shop.refresh_from_db()
    assert shop.notify_webhook is False


def test_without_a_shared_number_the_history_filter_is_as_before(browser_client, user):
    NumberFactory(owner=user, alias="Mine")

    page = browser_client.get("/history").text

    assert "All numbers" in page and "optgroup" not in page
