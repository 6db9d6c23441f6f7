"""PUT/GET/DELETE /api/numbers/:id/forwarding (issue 28, the contract): stored and validated
on every provider; targets that would loop or that the dialing policy refuses are refused."""

import pytest

from accounts.models import DialRefusal
from tests.dialing import REFUSED
from tests.factories import InventoryNumberFactory, NumberFactory
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db

OFF = {"targets": [], "ringSeconds": 20, "screening": False, "callerId": "caller"}


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


def url(number) -> str:
    return f"/api/numbers/{number.pk}/forwarding"


def put(client, number, **body):
    return client.put(url(number), body, format="json")


def test_the_owners_browser_is_a_target_beside_phones(client_jwt, number):
    body = {"targets": ["browser", "+447400123456"], "ringSeconds": 20}

    response = put(client_jwt, number, **body)

    assert response.status_code == 200, response.content
    assert response.json()["targets"] == ["browser", "+447400123456"]
    number.refresh_from_db()
    assert number.forward_targets == ["browser", "+447400123456"]


def test_a_number_forwards_nowhere_until_told(client_jwt, number):
    response = client_jwt.get(url(number))

    assert response.status_code == 200
    assert response.json() == OFF


def test_put_stores_the_forwarding_and_answers_it(client_jwt, number):
    body = {
        "targets": ["+447400123456", "+442079460999"],
        "ringSeconds": 30,
        "screening": True,
        "callerId": "number",
    }

    response = put(client_jwt, number, **body)

    assert response.status_code == 200, response.content
    assert response.json() == body
    assert client_jwt.get(url(number)).json() == body
    number.refresh_from_db()
    assert (
        number.forward_targets,
        number.forward_ring_seconds,
        number.forward_screening,
        number.forward_caller_id,
    ) == (["+447400123456", "+442079460999"], 30, True, "number")


def test_fields_left_out_take_their_defaults_and_a_put_replaces_everything(client_jwt, number):
    put(client_jwt, number, targets=["+447400123456"], ringSeconds=45, screening=True)

    response = put(client_jwt, number, targets=["+447400123457"])

    assert response.json() == {**OFF, "targets": ["+447400123457"]}


def test_delete_turns_forwarding_off_and_answers_204(client_jwt, number):
    put(client_jwt, number, targets=["+447400123456"], ringSeconds=45)

    response = client_jwt.delete(url(number))

    assert response.status_code == 204
    assert response.content == b""
    assert client_jwt.get(url(number)).json() == OFF


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_another_users_number_is_not_found(outsider, number, method):
    body = {"targets": ["+447400123456"]}
    response = getattr(outsider, method)(url(number), body, format="json")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    number.refresh_from_db()
    assert number.forward_targets == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "targets"),
        ({"targets": []}, "targets"),
        ({"targets": "+447400123456"}, "targets"),
        ({"targets": ["+447400123456"] * 2}, "targets"),
        (
            {"targets": ["+447400123451", "+447400123452", "+447400123453", "+447400123454"]},
            "targets",
        ),
        ({"targets": ["07700900456"]}, "targets"),
        ({"targets": ["+4477009004"]}, "targets"),
        ({"targets": [None]}, "targets"),
        ({"targets": ["+447400123456\u0000"]}, "targets"),
        ({"targets": ["Browser"]}, "targets"),  # the one word, exactly
        ({"targets": ["browser", "browser"]}, "targets"),
        ({"targets": ["+447400123456"], "ringSeconds": 4}, "ringSeconds"),
        ({"targets": ["+447400123456"], "ringSeconds": 61}, "ringSeconds"),
        ({"targets": ["+447400123456"], "ringSeconds": "20"}, "ringSeconds"),
        ({"targets": ["+447400123456"], "ringSeconds": True}, "ringSeconds"),
        ({"targets": ["+447400123456"], "ringSeconds": 10**50}, "ringSeconds"),
        ({"targets": ["+447400123456"], "screening": "yes"}, "screening"),
        ({"targets": ["+447400123456"], "screening": 1}, "screening"),
        ({"targets": ["+447400123456"], "callerId": "both"}, "callerId"),
        ({"targets": ["+447400123456"], "callerId": ["caller"]}, "callerId"),
        ('{"targets": ["+447400123456"], "callerId": "\\ud800"}', "callerId"),
    ],
)
def test_bad_forwarding_is_refused_naming_the_field(client_jwt, number, body, field):
    if isinstance(body, str):  # raw JSON: a lone surrogate the test client cannot encode
        response = client_jwt.put(url(number), body, content_type="application/json")
    else:
        response = client_jwt.put(url(number), body, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    named = response.json()["fields"]
    assert any(name == field or name.startswith(f"{field}.") for name in named), named
    number.refresh_from_db()
    assert number.forward_targets == []


def test_a_number_of_the_inventory_is_refused_held_or_not(client_jwt, number, other_user):
    free = InventoryNumberFactory().e164
    held = NumberFactory(owner=other_user).number

    for target in (number.number, free, held):
        response = put(client_jwt, number, targets=["+447400123456", target])

        assert response.status_code == 400, target
        body = response.json()
        assert body["code"] == "destination_not_allowed"
        assert body["error"] == f"{target} is a number of this service; ringing it would loop."
        assert body["fields"] == {"targets": [f"{target} is a number of this service."]}
    number.refresh_from_db()
    assert number.forward_targets == []


@pytest.mark.parametrize(("target", "reason", "overrides", "says"), REFUSED)
def test_every_target_the_dialing_policy_refuses_is_refused(
    settings, user, client_jwt, number, target, reason, overrides, says
):
    for name, value in overrides.items():
        setattr(settings, name, value)

    response = put(client_jwt, number, targets=["+447400123456", target])

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "destination_not_allowed"
    assert says in body["error"]
    assert body["fields"] == {"targets": [body["error"]]}
    assert Number.objects.get(pk=number.pk).forward_targets == []
    refusal = DialRefusal.objects.get(user=user)
    assert (refusal.kind, refusal.reason) == ("destination", reason)


def test_staffs_countries_for_the_owner_allow_a_target_abroad(user, client_jwt, number):
    user.dial_countries = "FR"
    user.save(update_fields=["dial_countries"])

    response = put(client_jwt, number, targets=["+33612345678"])

    assert response.status_code == 200
    assert response.json()["targets"] == ["+33612345678"]


def test_setting_forwarding_is_rate_limited_per_user(settings, client_jwt, number):
    settings.RATE_LIMIT_FORWARDING_PER_USER = "2/h"

    codes = [put(client_jwt, number, targets=["+447400123456"]).status_code for _ in range(3)]

    assert codes == [200, 200, 429]
    limited = put(client_jwt, number, targets=["+447400123457"])
    assert limited.json()["code"] == "rate_limited"
    assert int(limited["Retry-After"]) >= 1
    assert client_jwt.get(url(number)).json()["targets"] == ["+447400123456"]


def test_the_api_key_works_too(client_key, number):
    assert put(client_key, number, targets=["+447400123456"]).status_code == 200


@pytest.mark.parametrize(
    ("targets", "sentence"),
    [
        ([], "Give at least one number to ring."),
        ([f"+44740012345{i}" for i in range(4)], "Give at most 3 numbers to ring."),
    ],
)
def test_too_few_or_too_many_targets_say_so_in_a_sentence(client_jwt, number, targets, sentence):
    response = client_jwt.put(url(number), {"targets": targets}, format="json")

    assert response.status_code == 400
    assert response.json()["fields"] == {"targets": [sentence]}
