"""A number given back rests NUMBER_QUARANTINE_HOURS before anyone may take it again, whether
its holder deleted it, staff released it or the holder's account was deleted: calls meant
for the last holder must not reach the next one."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts import services as accounts
from tests.conftest import jwt_client
from tests.factories import DEFAULT_PASSWORD, NumberFactory, UserFactory
from virtual_numbers import services
from virtual_numbers.models import InventoryNumber, Number

pytestmark = pytest.mark.django_db


def take(client, token):
    return client.post(
        "/api/numbers", {"alias": "next", "pin": "1234", "captchaToken": token}, format="json"
    )


def only_entry_left(number: Number) -> InventoryNumber:
    """Make `number`'s entry the whole inventory: a taker can only get that one."""
    InventoryNumber.objects.exclude(pk=number.inventory_id).delete()
    return number.inventory


def test_a_deleted_number_rests_before_anyone_takes_it_again(
    user, client_jwt, other_user, captcha_token, clock, settings
):
    settings.NUMBER_QUARANTINE_HOURS = 720
    number = NumberFactory(owner=user)
    entry = only_entry_left(number)
    assert client_jwt.delete(f"/api/numbers/{number.pk}").status_code == 200

    entry.refresh_from_db()
    assert entry.free_from - timezone.now() == pytest.approx(
        timedelta(hours=720), abs=timedelta(minutes=1)
    )
    next_holder = jwt_client(accounts.session_open(user=other_user).token)
    refused = take(next_holder, captcha_token())
    assert refused.status_code == 503
    assert refused.json()["code"] == "no_numbers_available"

    clock.advance(hours=719)
    assert take(next_holder, captcha_token()).status_code == 503
    clock.advance(hours=1, seconds=1)
    taken = take(next_holder, captcha_token())
    assert taken.status_code == 201
    assert taken.json()["number"] == entry.e164


def test_the_last_holder_cannot_take_it_straight_back_either(
    user, client_jwt, captcha_token, settings
):
    settings.NUMBER_QUARANTINE_HOURS = 1
    number = NumberFactory(owner=user)
    only_entry_left(number)
    client_jwt.delete(f"/api/numbers/{number.pk}")

    assert take(client_jwt, captcha_token()).json()["code"] == "no_numbers_available"


def test_a_number_staff_release_rests_too(user, settings):
    settings.NUMBER_QUARANTINE_HOURS = 24
    number = NumberFactory(owner=user)
    entry = number.inventory

    services.number_release(number=number)

    entry.refresh_from_db()
    assert entry.free_from > timezone.now() + timedelta(hours=23)


def test_a_deleted_accounts_numbers_rest_too(user, client_jwt, settings):
    settings.NUMBER_QUARANTINE_HOURS = 24
    entries = [NumberFactory(owner=user).inventory for _ in range(2)]

    response = client_jwt.delete("/api/user/me", {"password": DEFAULT_PASSWORD}, format="json")

    assert response.status_code == 204
    for entry in entries:
        entry.refresh_from_db()
        assert entry.free_from > timezone.now() + timedelta(hours=23)
        assert not Number.objects.filter(inventory=entry).exists()


def test_with_no_quarantine_a_number_is_free_at_once(user, client_jwt, captcha_token, settings):
    settings.NUMBER_QUARANTINE_HOURS = 0
    number = NumberFactory(owner=user)
    entry = only_entry_left(number)
    client_jwt.delete(f"/api/numbers/{number.pk}")

    taken = take(client_jwt, captcha_token())

    assert taken.status_code == 201 and taken.json()["number"] == entry.e164


def test_staff_end_a_quarantine_in_the_admin(staff_client, user, settings):
    settings.NUMBER_QUARANTINE_HOURS = 720
    number = NumberFactory(owner=user)
    entry = number.inventory
    services.number_delete(number=number)
    fresh = NumberFactory(owner=UserFactory()).inventory  # held, never quarantined

    response = staff_client.post(
        "/admin/numbers/inventorynumber/",
        {"action": "quarantine_end", "_selected_action": [entry.pk, fresh.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "1 number(s) free to take now." in response.content.decode()
    entry.refresh_from_db()
    assert entry.free_from is None
