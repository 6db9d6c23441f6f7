"""A member's switches for a shared number (issue 57): GET and PUT /api/numbers/shared/:id,
by the member alone; the owner's account switches stay as they are."""

import pytest

from accounts.services import user_api_key_regenerate
from tests.conftest import api_key_client
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory
from tests.numbers.test_members import client_of, members_url
from tests.security.test_bad_input import DEEP, HUGE_INT, assert_error, post_raw
from virtual_numbers.models import NumberMember

pytestmark = pytest.mark.django_db

SWITCHES = {"webhook", "matrix", "missedCallEmail", "voicemailEmail"}


@pytest.fixture
def membership():
    return NumberMemberFactory(number=NumberFactory(alias="Shop"))


def shared_url(number) -> str:
    return f"/api/numbers/shared/{number.pk}"


def test_a_members_switches_are_off_until_they_turn_them_on(membership):
    client = client_of(membership.user)

    listed = client.get("/api/numbers/shared").json()["numbers"]
    read = client.get(shared_url(membership.number))

    assert read.status_code == 200
    assert {key: listed[0][key] for key in SWITCHES} == dict.fromkeys(SWITCHES, False)
    assert read.json() == listed[0]
    assert read.json()["role"] == "member"


def test_a_member_turns_on_some_switches_and_the_list_shows_them(membership):
    client = client_of(membership.user)

    answer = client.put(
        shared_url(membership.number),
        {"webhook": True, "voicemailEmail": True},
        format="json",
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["webhook"] is True
    assert answer.json()["voicemailEmail"] is True
    assert answer.json()["matrix"] is False
    listed = client.get("/api/numbers/shared").json()["numbers"][0]
    assert (listed["webhook"], listed["matrix"], listed["missedCallEmail"]) == (True, False, False)
    membership.refresh_from_db()
    assert (membership.notify_webhook, membership.voicemail_email) == (True, True)
    # and back off, one switch alone
    client.put(shared_url(membership.number), {"webhook": False}, format="json")
    membership.refresh_from_db()
    assert (membership.notify_webhook, membership.voicemail_email) == (False, True)


def test_an_empty_put_is_a_read(membership):
    answer = client_of(membership.user).put(shared_url(membership.number), {}, format="json")

    assert answer.status_code == 200
    assert answer.json()["memberId"] == str(membership.pk)


@pytest.mark.parametrize("value", ["yes", 1, None, [True], {"a": True}])
def test_a_switch_that_is_not_a_boolean_is_a_400(membership, value):
    answer = client_of(membership.user).put(
        shared_url(membership.number), {"matrix": value}, format="json"
    )

    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_request"
    assert "matrix" in answer.json()["fields"]
    membership.refresh_from_db()
    assert membership.notify_matrix is False


def test_the_owner_has_no_membership_to_switch_and_keeps_their_account_switches(membership):
    owner = membership.number.owner
    client = client_of(owner)

    answer = client.put(shared_url(membership.number), {"webhook": True}, format="json")

    assert answer.status_code == 404
    assert client.get(shared_url(membership.number)).status_code == 404
    owner.refresh_from_db()
    assert (owner.missed_call_email, owner.voicemail_email) == (False, False)


def test_an_outsider_gets_404_and_changes_nothing(membership):
    outsider = client_of(UserFactory())

    for answer in (
        outsider.get(shared_url(membership.number)),
        outsider.put(shared_url(membership.number), {"webhook": True}, format="json"),
    ):
        assert answer.status_code == 404
        assert answer.json()["code"] == "not_found"
    membership.refresh_from_db()
    assert membership.notify_webhook is False


@pytest.mark.parametrize("number_id", ["nope", "00000000-0000-0000-0000-000000000000", "%00"])
def test_an_unknown_or_malformed_id_is_404(membership, number_id):
    answer = client_of(membership.user).put(
        f"/api/numbers/shared/{number_id}", {"webhook": True}, format="json"
    )

    assert answer.status_code == 404


def test_a_manager_cannot_switch_another_members_notices(membership):
    manager = NumberMemberFactory(number=membership.number, role="manager")
    client = client_of(manager.user)

    # the manager's PUT reaches their own membership only
    client.put(shared_url(membership.number), {"missedCallEmail": True}, format="json")
    role_put = client.put(
        members_url(membership.number, membership.pk),
        {"role": "manager", "missedCallEmail": True},
        format="json",
    )

    assert role_put.status_code == 200
    membership.refresh_from_db()
    manager.refresh_from_db()
    assert membership.missed_call_email is False
    assert manager.missed_call_email is True


def test_a_member_cannot_change_their_own_role_through_their_switches(membership):
    client = client_of(membership.user)

    answer = client.put(
        shared_url(membership.number), {"role": "manager", "webhook": True}, format="json"
    )

    assert answer.status_code == 200
    assert answer.json()["role"] == "member"
    assert NumberMember.objects.get(pk=membership.pk).role == "member"


def test_a_member_who_left_gets_404(membership):
    client = client_of(membership.user)
    left = client.delete(members_url(membership.number, membership.pk))
    assert left.status_code == 200

    answer = client.put(shared_url(membership.number), {"webhook": True}, format="json")

    assert answer.status_code == 404


def test_an_api_key_reaches_the_members_switches(membership):
    key = user_api_key_regenerate(user=membership.user)

    answer = api_key_client(key).put(shared_url(membership.number), {"matrix": True}, format="json")

    assert answer.status_code == 200
    assert answer.json()["matrix"] is True


@pytest.mark.parametrize(
    "text",
    [DEEP, '{"webhook": "\\ud800"}', '{"webhook\\u0000": true}', f'{{"matrix": {HUGE_INT}}}'],
)
def test_hostile_bodies_are_a_clear_400(membership, text):
    client = client_of(membership.user)

    body = assert_error(post_raw(client, shared_url(membership.number), text, "put"))

    assert body["error"]
    membership.refresh_from_db()
    assert (membership.notify_webhook, membership.notify_matrix) == (False, False)


def test_an_outsiders_hostile_body_is_a_404_before_any_400(membership):
    outsider = client_of(UserFactory())

    assert_error(post_raw(outsider, shared_url(membership.number), DEEP, "put"), 404, "not_found")
