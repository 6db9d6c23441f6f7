"""Who changes how a shared number takes calls (issue 57's roles): its owner and its managers
set the greeting (text and recorded), the opening hours and the closed greeting, as they do the
ring list; a member is told 403 and changes nothing; anyone else, a member who left included,
is told 404 (the console's pages: tests/console/test_managed_pages.py)."""

import pytest
from django.core.files.base import ContentFile

from accounts.services import session_open
from core.recordings import recordings_storage
from tests.conftest import jwt_client
from tests.factories import NumberFactory, NumberMemberFactory, wav_bytes
from virtual_numbers import services
from virtual_numbers.models import GREETING_PREFIX, Number, OpeningHours
from virtual_numbers.selectors import number_shared_access

pytestmark = pytest.mark.django_db(transaction=True)

HOURS = {
    "timeZone": "Europe/London",
    "weekly": [{"days": ["mon"], "start": "09:00", "end": "17:00"}],
}


@pytest.fixture
def number(user):
    """One of `user`'s numbers with a text greeting, a recorded one, and hours with a recorded
    closed greeting."""
    number = NumberFactory(owner=user, greeting="You reached the shop.")
    OpeningHours.objects.create(number=number, time_zone="UTC", closed_greeting="Closed.")
    for closed in (False, True):
        name = recordings_storage().save(
            f"{GREETING_PREFIX}managed.wav", ContentFile(wav_bytes(1.0))
        )
        services.number_greeting_recording_set(number=number, name=name, seconds=1.0, closed=closed)
    return Number.objects.get(pk=number.pk)


def client_of(user):
    return jwt_client(session_open(user=user).token)


def reads(number) -> list[str]:
    base = f"/api/numbers/{number.pk}"
    return [
        f"{base}/greeting",
        f"{base}/greeting/recording",
        f"{base}/hours",
        f"{base}/hours/closed-greeting",
    ]


def changes(client, number) -> list:
    """Every change a manager may make, in an order where each still finds what it changes."""
    base = f"/api/numbers/{number.pk}"
    return [
        client.put(f"{base}/greeting", {"greeting": "Managed."}, format="json"),
        client.delete(f"{base}/greeting/recording"),
        client.delete(f"{base}/hours/closed-greeting"),
        client.put(f"{base}/hours", HOURS, format="json"),
        client.delete(f"{base}/hours"),
    ]


def test_a_manager_reads_and_changes_the_greetings_and_hours(number):
    manager = client_of(NumberMemberFactory(number=number, role="manager").user)

    assert [manager.get(path).status_code for path in reads(number)] == [200] * 4
    assert [response.status_code for response in changes(manager, number)] == [
        200,
        200,
        200,
        200,
        204,
    ]

    stored = Number.objects.get(pk=number.pk)
    assert (stored.greeting, stored.greeting_recording) == ("Managed.", "")
    assert not OpeningHours.objects.filter(number=number).exists()


def test_a_member_is_forbidden_and_changes_nothing(number):
    member = client_of(NumberMemberFactory(number=number, role="member").user)

    answered = [member.get(path) for path in reads(number)] + changes(member, number)

    assert [(r.status_code, r.json()["code"]) for r in answered] == [(403, "permission_denied")] * 9
    stored = Number.objects.get(pk=number.pk)
    assert stored.greeting == "You reached the shop."
    assert recordings_storage().exists(stored.greeting_recording)
    hours = OpeningHours.objects.get(number=number)
    assert (hours.time_zone, hours.closed_greeting) == ("UTC", "Closed.")
    assert recordings_storage().exists(hours.closed_greeting_recording)


def test_a_manager_who_left_and_a_stranger_are_not_found(number, other_user):
    manager = NumberMemberFactory(number=number, role="manager")
    access = number_shared_access(user=number.owner, number_id=number.pk)
    services.member_remove(access=access, member=manager)

    for client in (client_of(manager.user), client_of(other_user)):
        answered = [client.get(path) for path in reads(number)] + changes(client, number)
        assert [(r.status_code, r.json()["code"]) for r in answered] == [(404, "not_found")] * 9
    assert Number.objects.get(pk=number.pk).greeting == "You reached the shop."
