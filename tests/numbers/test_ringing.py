"""PUT/GET/DELETE /api/numbers/:id/ringing (issue 57, ring groups): the ring list of phones,
SIP URIs and members, set by the owner or a manager; every refused entry named by its index,
nothing stored; /forwarding is the same list seen as phones."""

import pytest

from accounts.models import DialRefusal
from accounts.services import session_open
from tests.conftest import jwt_client
from tests.dialing import REFUSED
from tests.factories import InventoryNumberFactory, NumberFactory, NumberMemberFactory
from virtual_numbers.models import Number
from virtual_numbers.selectors import number_shared_access, numbers_export
from virtual_numbers.services import member_remove

pytestmark = pytest.mark.django_db

OFF = {
    "strategy": "all",
    "ringSeconds": 20,
    "screening": False,
    "callerId": "caller",
    "entries": [],
}
PHONE = "+447400123456"


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def client_of(user):
    return jwt_client(session_open(user=user).token)


def url(number) -> str:
    return f"/api/numbers/{number.pk}/ringing"


def put(client, number, body):
    return client.put(url(number), body, format="json")


def removed(member) -> None:
    """`member` removed by the number's owner, as DELETE .../members/:id does."""
    access = number_shared_access(user=member.number.owner, number_id=member.number_id)
    member_remove(access=access, member=member)


def stored(number) -> list:
    return Number.objects.get(pk=number.pk).ring_entries


def test_a_number_rings_nobody_until_told(client_jwt, number):
    response = client_jwt.get(url(number))

    assert response.status_code == 200
    assert response.json() == OFF


def test_put_stores_the_ring_list_in_order_and_answers_it(client_jwt, user, number):
    member = NumberMemberFactory(number=number)
    body = {
        "strategy": "in_order",
        "ringSeconds": 25,
        "screening": True,
        "callerId": "number",
        "entries": [
            {"member": str(member.user_id), "ringSeconds": 10},
            {"sip": "SIP:desk@pbx.example.com;transport=tcp"},
            {"phone": PHONE, "ringSeconds": 60},
            {"member": str(user.pk)},
        ],
    }

    response = put(client_jwt, number, body)

    assert response.status_code == 200, response.content
    expected = {**body, "entries": [*body["entries"]]}
    expected["entries"][1] = {"sip": "sip:desk@pbx.example.com;transport=tcp"}
    assert response.json() == expected
    assert client_jwt.get(url(number)).json() == expected
    number.refresh_from_db()
    assert (number.ring_strategy, number.forward_ring_seconds, number.forward_screening) == (
        "in_order",
        25,
        True,
    )
    # /forwarding sees the same list: its phones, and the owner's own entry as "browser"
    assert client_jwt.get(f"/api/numbers/{number.pk}/forwarding").json()["targets"] == [
        PHONE,
        "browser",
    ]


def test_forwarding_writes_the_ring_list(client_jwt, user, number):
    forwarding = {"targets": ["browser", PHONE], "ringSeconds": 30}

    assert (
        client_jwt.put(
            f"/api/numbers/{number.pk}/forwarding", forwarding, format="json"
        ).status_code
        == 200
    )

    assert client_jwt.get(url(number)).json() == {
        "strategy": "all",
        "ringSeconds": 30,
        "screening": False,
        "callerId": "caller",
        "entries": [{"member": str(user.pk)}, {"phone": PHONE}],
    }


def test_delete_rings_nobody_and_turns_forwarding_off(client_jwt, number):
    put(client_jwt, number, {"entries": [{"phone": PHONE}]})

    assert client_jwt.delete(url(number)).status_code == 204

    assert client_jwt.get(url(number)).json() == OFF
    assert client_jwt.get(f"/api/numbers/{number.pk}/forwarding").json()["targets"] == []


def test_a_manager_sets_the_list_and_a_member_is_forbidden(client_jwt, number):
    manager = NumberMemberFactory(number=number, role="manager")
    member = NumberMemberFactory(number=number, role="member")
    body = {"entries": [{"member": str(member.user_id)}]}

    as_manager = client_of(manager.user)
    assert put(as_manager, number, body).status_code == 200
    assert as_manager.get(url(number)).json()["entries"] == body["entries"]

    as_member = client_of(member.user)
    for response in (
        as_member.get(url(number)),
        put(as_member, number, {"entries": [{"phone": PHONE}]}),
        as_member.delete(url(number)),
    ):
        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
    assert stored(number) == body["entries"]


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_another_users_number_is_not_found(outsider, number, method):
    response = getattr(outsider, method)(
        url(number), {"entries": [{"phone": PHONE}]}, format="json"
    )

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_member_who_left_is_not_found_and_cannot_change_it(client_jwt, number):
    manager = NumberMemberFactory(number=number, role="manager")
    removed(manager)

    response = put(client_of(manager.user), number, {"entries": [{"phone": PHONE}]})

    assert response.status_code == 404


def test_an_unknown_or_malformed_number_is_not_found(client_jwt):
    for pk in ("9b4a7d59-1f5e-4c5e-8f39-0a4d9b0f3c11", "not-a-uuid"):
        assert client_jwt.get(f"/api/numbers/{pk}/ringing").status_code == 404


def entries(*items) -> dict:
    return {"entries": list(items)}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "entries"),
        (entries(), "entries"),
        ({"entries": "phone"}, "entries"),
        (entries(*({"phone": f"+4474001234{n:02}"} for n in range(11))), "entries"),
        (entries({"phone": PHONE}, {}), "entries.1"),
        (entries({"phone": PHONE, "sip": "sip:a@pbx.example.com"}), "entries.0"),
        (entries({"phone": PHONE, "member": "9b4a7d59-1f5e-4c5e-8f39-0a4d9b0f3c11"}), "entries.0"),
        (entries({"phone": PHONE}, {"phone": PHONE}), "entries.1"),
        (entries({"sip": "sip:a@pbx.example.com"}, {"sip": "SIP:a@pbx.example.com"}), "entries.1"),
        (entries({"phone": "07400 123456"}), "entries.0.phone"),
        (entries({"phone": 447400123456}), "entries.0.phone"),
        (entries({"sip": "tel:+447400123456"}), "entries.0.sip"),
        (entries({"sip": "http://pbx.example.com"}), "entries.0.sip"),
        (entries({"sip": "sip:"}), "entries.0.sip"),
        (entries({"sip": "sip:desk@pbx.example.com?Subject=hi"}), "entries.0.sip"),
        (entries({"sip": "sip:desk@pbx.example.com:99999"}), "entries.0.sip"),
        (entries({"sip": "sip:desk@pbx example.com"}), "entries.0.sip"),
        (entries({"sip": "sip:" + "a" * 300 + "@pbx.example.com"}), "entries.0.sip"),
        (entries({"member": "nobody"}), "entries.0.member"),
        (entries({"member": 12}), "entries.0.member"),
        (entries({"phone": PHONE, "ringSeconds": 4}), "entries.0.ringSeconds"),
        (entries({"phone": PHONE, "ringSeconds": 61}), "entries.0.ringSeconds"),
        (entries({"phone": PHONE, "ringSeconds": "20"}), "entries.0.ringSeconds"),
        (entries({"phone": PHONE, "ringSeconds": 10**30}), "entries.0.ringSeconds"),
        (entries({"phone": PHONE, "colour": "red"}), "entries.0.colour"),
        ({**entries({"phone": PHONE}), "strategy": "random"}, "strategy"),
        ({**entries({"phone": PHONE}), "ringSeconds": 0}, "ringSeconds"),
        ({**entries({"phone": PHONE}), "screening": "yes"}, "screening"),
        ('{"entries": [{"sip": "sip:\\ud800@pbx.example.com"}]}', "entries.0.sip"),
        ('{"entries": [{"phone": "+447400123456\\u0000"}]}', "entries.0.phone"),
        ('{"entries": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}', None),
    ],
)
def test_bad_entries_are_refused_naming_the_place_and_nothing_is_stored(
    client_jwt, number, body, field
):
    put(client_jwt, number, entries({"phone": "+442079460999"}))
    if isinstance(body, str):  # raw JSON: what the test client cannot encode
        response = client_jwt.put(url(number), body, content_type="application/json")
    else:
        response = put(client_jwt, number, body)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    if field is not None:  # None: refused as too deep before any field is read
        named = response.json()["fields"]
        assert any(name == field or name.startswith(f"{field}.") for name in named), named
    assert stored(number) == [{"phone": "+442079460999"}]


def test_a_member_entry_must_be_the_owner_or_an_active_member(client_jwt, number, other_user):
    invited_only = NumberMemberFactory(
        number=number,
        user=None,
        email="invited@example.com",
        status="invited",
        token_hash="x" * 64,
        expires_at="2999-01-01T00:00:00Z",
        joined_at=None,
    )
    left = NumberMemberFactory(number=number)
    removed(left)
    elsewhere = NumberMemberFactory(number=NumberFactory(owner=other_user))

    for who in (other_user.pk, left.user_id, elsewhere.user_id, invited_only.pk):
        response = put(client_jwt, number, entries({"phone": PHONE}, {"member": str(who)}))

        assert response.status_code == 400, who
        body = response.json()
        assert body["code"] == "invalid_request"
        assert list(body["fields"]) == ["entries.1.member"]
    assert stored(number) == []


def test_a_sip_uri_to_a_private_address_is_refused_unless_allowed(settings, client_jwt, number):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    for uri in ("sip:desk@127.0.0.1", "sips:desk@10.0.0.7:5061", "sip:[::1]", "sip:localhost"):
        response = put(client_jwt, number, entries({"phone": PHONE}, {"sip": uri}))

        assert response.status_code == 400, uri
        assert list(response.json()["fields"]) == ["entries.1.sip"], uri
    assert stored(number) == []

    settings.WEBHOOK_ALLOW_PRIVATE = True
    response = put(client_jwt, number, entries({"sip": "sip:desk@127.0.0.1:5070"}))

    assert response.status_code == 200, response.content
    assert stored(number) == [{"sip": "sip:desk@127.0.0.1:5070"}]


def test_a_number_of_the_inventory_is_refused_naming_its_entry(client_jwt, number):
    free = InventoryNumberFactory().e164

    response = put(client_jwt, number, entries({"phone": PHONE}, {"phone": free}))

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "destination_not_allowed"
    assert body["fields"] == {"entries.1.phone": [f"{free} is a number of this service."]}
    assert stored(number) == []


@pytest.mark.parametrize(("target", "reason", "overrides", "says"), REFUSED[:3])
def test_a_phone_the_dialing_policy_refuses_is_refused_naming_its_entry(
    settings, user, client_jwt, number, target, reason, overrides, says
):
    for name, value in overrides.items():
        setattr(settings, name, value)

    response = put(client_jwt, number, entries({"sip": "sip:a@pbx.example.com"}, {"phone": target}))

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "destination_not_allowed"
    assert says in body["error"]
    assert body["fields"] == {"entries.1.phone": [body["error"]]}
    assert DialRefusal.objects.filter(user=user, reason=reason).count() == 1
    assert stored(number) == []


def test_ten_entries_are_taken(client_jwt, number):
    ten = [{"sip": f"sip:desk{n}@pbx.example.com", "ringSeconds": 5 + n} for n in range(10)]

    assert put(client_jwt, number, {"entries": ten}).status_code == 200
    assert stored(number) == ten


def test_setting_the_ring_list_is_rate_limited_per_user(settings, client_jwt, number):
    settings.RATE_LIMIT_FORWARDING_PER_USER = "2/h"
    body = entries({"phone": PHONE})

    codes = [put(client_jwt, number, body).status_code for _ in range(3)]

    assert codes == [200, 200, 429]
    assert put(client_jwt, number, body).json()["code"] == "rate_limited"


def test_the_api_key_works_too(client_key, number):
    assert put(client_key, number, entries({"phone": PHONE})).status_code == 200


def test_the_owners_export_holds_the_ring_list(client_jwt, user, number):
    put(client_jwt, number, {"strategy": "in_order", **entries({"member": str(user.pk)})})

    [exported] = list(numbers_export(user=user)["numbers"])

    assert exported["ringing"]["strategy"] == "in_order"
    assert exported["ringing"]["entries"] == [{"member": str(user.pk)}]
