"""A refused phone number says which of two things is wrong (issue 38, part 4): it is not in
E.164 form at all, or it is, but in no range in use. The same two sentences wherever a number
is taken: a call's `to` (HTTP and the socket), forwarding targets, the blocklist and the
operators' commands. Before, Ofcom's drama mobile +447700900456, the forwarding page's own
example, was refused as not "in E.164 form", which it is."""

import json
import re

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from calls.models import Call
from core.phone import (
    E164_FORM_PROBLEM,
    E164_UNASSIGNED_PROBLEM,
    e164_possible,
    e164_problem,
    e164_valid,
)
from tests.factories import NumberFactory
from virtual_numbers.models import BlockedCaller, InventoryNumber

pytestmark = pytest.mark.django_db

FORM, UNASSIGNED = E164_FORM_PROBLEM, E164_UNASSIGNED_PROBLEM

NOT_IN_E164_FORM = [
    pytest.param("07700900456", id="no-plus"),
    pytest.param("+1800FLOWERS", id="letters-of-a-vanity-number"),
    pytest.param("+442079460123 ext 5", id="an-extension"),
    pytest.param("+44207946O123", id="letter-o-for-zero"),
    pytest.param("+4420794601234567", id="sixteen-digits"),
    pytest.param("+44123", id="five-digits"),
    pytest.param("+0442079460123", id="country-code-of-0"),
    pytest.param("+４４2079460123", id="fullwidth-digits"),
    pytest.param("+44" + "9" * 5000, id="far-too-long"),
    pytest.param("+44_20_7946_0123", id="underscores"),
]
# In E.164 form, but no phone has them: Ofcom's drama mobiles (valid nowhere, possible in
# GB), a country code no one has, and a number longer than any of GB's.
IN_NO_RANGE_IN_USE = [
    pytest.param("+447700900456", id="ofcom-drama-mobile"),
    pytest.param("+999123456789", id="no-such-country-code"),
    pytest.param("+4412345678901", id="too-long-for-gb"),
]


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


# --- the rule itself ----------------------------------------------------------------------


@pytest.mark.parametrize("raw", NOT_IN_E164_FORM)
def test_a_number_not_in_e164_form_is_refused_for_its_form(raw):
    assert (e164_valid(raw), e164_possible(raw)) == (None, None)
    assert e164_problem(raw, assigned=True) == e164_problem(raw, assigned=False) == FORM


@pytest.mark.parametrize("raw", IN_NO_RANGE_IN_USE[1:])
def test_a_number_of_no_range_is_refused_for_its_range_even_as_a_caller(raw):
    assert e164_problem(raw, assigned=True) == e164_problem(raw, assigned=False) == UNASSIGNED


def test_a_drama_mobile_is_no_number_to_dial_but_may_be_a_caller():
    assert e164_problem("+447700900456", assigned=True) == UNASSIGNED
    assert e164_problem("+447700900456", assigned=False) is None
    assert e164_possible("+447700900456") == "+447700900456"


@pytest.mark.parametrize(
    "written",
    [
        "+44 20 7946 0123",
        "+44-20-7946-0123",
        "+44.20.7946.0123",
        "+44 (0)20 7946 0123",
        " +442079460123\n",
    ],
)
def test_digits_grouped_for_reading_are_taken_and_normalised(written):
    assert e164_valid(written) == e164_possible(written) == "+442079460123"


def test_the_forms_example_is_a_number_every_field_takes():
    example = re.search(r"\+\d+", FORM).group()

    assert e164_valid(example) == e164_possible(example) == example


def test_docs_errors_quotes_the_two_sentences():
    text = (settings.BASE_DIR / "docs" / "errors.md").read_text()
    quoted = " ".join(text.split())  # the doc wraps its lines

    assert f'"{FORM}"' in quoted and f'"{UNASSIGNED}"' in quoted


# --- a call's `to` ------------------------------------------------------------------------


def submit(client, to):
    body = {"callId": "c1", "to": to, "message": "Hello"}
    return client.post("/api/calls", body, format="json")


@pytest.mark.parametrize(
    ("to", "sentence"),
    [*((p.values[0], FORM) for p in NOT_IN_E164_FORM[:4]), ("+447700900456", UNASSIGNED)],
)
def test_a_call_to_a_refused_number_says_why(client_jwt, to, sentence):
    response = submit(client_jwt, to)

    assert response.status_code == 400
    assert response.json() == {
        "error": f"to: {sentence}",
        "code": "invalid_request",
        "fields": {"to": [sentence]},
    }
    assert not Call.objects.exists()


def test_a_call_without_a_to_is_told_the_form(client_jwt):
    response = client_jwt.post("/api/calls", {"callId": "c1", "message": "Hi"}, format="json")

    assert response.json()["fields"] == {"to": [FORM]}


@pytest.mark.django_db(transaction=True)
async def test_the_socket_says_what_docs_websocket_shows_for_a_drama_mobile(communicator, user):
    socket, connected = await communicator(user)
    assert connected
    protocol = (settings.BASE_DIR / "docs" / "websocket.md").read_text()
    shown = protocol.split("### `error`", 1)[1].split("```json", 1)[1].split("```", 1)[0]

    await socket.send_json_to(
        {"type": "call", "callId": "order-1234", "to": "+447700900456", "message": "Hi"}
    )

    assert await socket.receive_json_from(timeout=5) == {"type": "error", **json.loads(shown)}


# --- forwarding targets and the blocklist -------------------------------------------------


def test_a_drama_mobile_as_a_forwarding_target_is_in_no_range(client_jwt, number):
    response = client_jwt.put(
        f"/api/numbers/{number.pk}/forwarding",
        {"targets": ["+441134960456", "+447700900456"]},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["fields"] == {"targets.1": [UNASSIGNED]}


def test_a_forwarding_target_with_letters_is_not_in_e164_form(client_jwt, number):
    response = client_jwt.put(
        f"/api/numbers/{number.pk}/forwarding", {"targets": ["+44 113 CALL ME"]}, format="json"
    )

    assert response.json()["fields"] == {"targets.0": [FORM]}


@pytest.mark.parametrize(
    ("caller", "sentence"),
    [("07700 900123", FORM), ("+44 7700 900abc", FORM), ("+999123456789", UNASSIGNED)],
)
def test_a_blocked_caller_is_refused_for_its_form_or_its_range(
    client_jwt, number, caller, sentence
):
    response = client_jwt.post(
        f"/api/numbers/{number.pk}/blocked", {"caller_num": caller}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["fields"] == {"caller_num": [sentence]}
    assert not BlockedCaller.objects.exists()


def test_a_drama_mobile_may_be_blocked_as_a_caller(client_jwt, number):
    response = client_jwt.post(
        f"/api/numbers/{number.pk}/blocked", {"caller_num": "+447700900456"}, format="json"
    )

    assert response.status_code == 201


# --- the operators' commands --------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "sentence"), [("+44 20 7946 OOOO", FORM), ("+447700900000", UNASSIGNED)]
)
def test_provision_numbers_says_why_a_start_is_refused(start, sentence):
    with pytest.raises(CommandError) as refused:
        call_command("provision_numbers", "--start", start, "--count", "1")

    assert str(refused.value) == f"{start!r}: {sentence}"
    assert not InventoryNumber.objects.exists()


@pytest.mark.parametrize(
    ("caller", "sentence"), [("+44 77OO", FORM), ("+4412345678901", UNASSIGNED)]
)
def test_record_call_says_why_a_caller_is_refused(number, caller, sentence):
    with pytest.raises(CommandError) as refused:
        call_command(
            "record_call", "--number", number.number, "--caller", caller, "--status", "missed"
        )

    assert str(refused.value) == f"caller_num: {sentence}"
