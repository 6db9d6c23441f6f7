"""POST /api/calls/:call/transfer (issue 58): who may ask, for which calls, with what `to`;
the agent holding the call is told through the channel layer. The transfer itself, with a
live agent and SIPp, is in tests/telephony/test_transfer.py."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from calls.models import Call, Leg, LegRole
from calls.states import CallState
from core import events
from history.records import record_rows
from telephony import services
from tests.conftest import jwt_client
from tests.factories import CallFactory, NumberFactory, NumberMemberFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = "+441134960200"
TARGET = "+441134960300"
SECOND = "+441134960302"


def inbound_call(number, *, bridged: bool = True) -> Call:
    """A call to `number` from the ledger's services: ringing, or bridged to PHONE."""
    call = services.inbound_call_open(
        sip_call_id=f"{number.pk}@test", number=number, caller_num="+447700900123", ringing=False
    )
    if bridged:
        [leg] = services.forward_legs_open(
            call=call, number=number, sip_call_ids={PHONE: f"leg-{number.pk}@test"}
        )
        services.forward_leg_bridged(call=call, leg=leg)
    return Call.objects.get(pk=call.pk)


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, forward_targets=[PHONE])


def listening(call: Call) -> str:
    """A channel in the call's group, as the agent holding it listens."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.call_group(call.pk), channel)
    return channel


def told(channel: str) -> dict:
    return async_to_sync(get_channel_layer().receive)(channel)


def test_the_owner_transfers_a_bridged_call_and_the_agent_is_told(client_jwt, number):
    call = inbound_call(number)
    channel = listening(call)
    response = client_jwt.post(f"/api/calls/{call.pk}/transfer", {"to": TARGET}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json() == {"call": str(call.pk), "to": TARGET, "status": "transferring"}
    assert told(channel) == {"type": "call.transfer", "to": TARGET}


def test_a_member_may_transfer_and_a_sip_uri_is_taken(number, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    member = NumberMemberFactory(number=number).user
    call = inbound_call(number)
    client = jwt_client(_token(member))
    uri = "sip:desk@pbx.example.com"
    response = client.post(f"/api/calls/{call.pk}/transfer", {"to": uri}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["to"] == uri


def _token(user) -> str:
    from accounts import services as accounts

    return accounts.session_open(user=user).token


def test_another_users_call_or_an_unknown_id_is_404(client_jwt):
    stranger = NumberFactory(owner=UserFactory(), forward_targets=[PHONE])
    call = inbound_call(stranger)
    for ref in (call.pk, "no-such-call", "6f1c2a4e-8d2b-4f4e-9a51-3c7e0b9d1a22"):
        response = client_jwt.post(f"/api/calls/{ref}/transfer", {"to": TARGET}, format="json")
        assert response.status_code == 404, (ref, response.json())
        assert response.json()["code"] == "not_found"


def test_a_call_not_bridged_is_409(client_jwt, number):
    call = inbound_call(number, bridged=False)
    response = client_jwt.post(f"/api/calls/{call.pk}/transfer", {"to": TARGET}, format="json")
    assert response.status_code == 409, response.json()
    assert response.json()["code"] == "call_not_transferable"


@pytest.mark.parametrize(
    ("to", "code"),
    [
        ("", "invalid_request"),
        (42, "invalid_request"),
        ("0113 496 0300", "invalid_request"),
        ("http://example.com/", "invalid_request"),
        ("sip:", "invalid_request"),
        ("+33123456789", "destination_not_allowed"),
    ],
)
def test_a_bad_or_refused_to_is_400_naming_it(client_jwt, number, to, code):
    call = inbound_call(number)
    response = client_jwt.post(f"/api/calls/{call.pk}/transfer", {"to": to}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == code and "to" in body["fields"], body


def test_a_missing_to_is_400(client_jwt, number):
    call = inbound_call(number)
    response = client_jwt.post(f"/api/calls/{call.pk}/transfer", {}, format="json")
    assert response.status_code == 400
    assert "to" in response.json()["fields"]


async def test_the_socket_frame_transfers_as_the_api_does_and_refuses_alike(communicator, user):
    number = await sync_to_async(NumberFactory)(owner=user, forward_targets=[PHONE])
    call = await sync_to_async(inbound_call)(number)
    layer = get_channel_layer()
    agent = await layer.new_channel()
    await layer.group_add(events.call_group(call.pk), agent)
    ws, accepted = await communicator(user)
    assert accepted
    ring = "ring-0123456789abcdef"

    frame = {"type": "call_transfer", "call": str(call.pk), "ring": ring}
    await ws.send_json_to({**frame, "to": "+33123456789"})
    refused = await ws.receive_json_from(timeout=5)
    assert (refused["type"], refused["code"], refused["ring"]) == (
        "error",
        "destination_not_allowed",
        ring,
    )
    assert "to" in refused["fields"]
    await ws.send_json_to({"type": "call_transfer", "call": "nobody's", "to": TARGET})
    assert (await ws.receive_json_from(timeout=5))["code"] == "not_found"

    await ws.send_json_to({**frame, "to": TARGET})
    assert await ws.receive_json_from(timeout=5) == {
        "type": "call_transfer",
        "call": str(call.pk),
        "to": TARGET,
        "status": "transferring",
    }
    async with asyncio.timeout(5):
        assert await layer.receive(agent) == {"type": "call.transfer", "to": TARGET}


def test_transfers_count_with_the_calls_placed_and_are_rate_limited(client_jwt, number, settings):
    settings.RATE_LIMIT_CALLS_PER_USER = "2/m"
    call = inbound_call(number)
    url = f"/api/calls/{call.pk}/transfer"
    assert [client_jwt.post(url, {"to": TARGET}, format="json").status_code for _ in "ab"] == [
        202,
        202,
    ]
    limited = client_jwt.post(url, {"to": TARGET}, format="json")
    assert limited.status_code == 429, limited.json()
    assert limited.json()["code"] == "rate_limited" and int(limited["Retry-After"]) >= 1


def transferred(call: Call, target: str = TARGET, *, answered: bool = True):
    """A transfer of `call` to `target` as the agent writes it: its leg dialled and, when
    `answered`, taken (the phone's leg then ended, as the agent hangs it up)."""
    sip_call_id = f"{target}-{call.pk}@test"
    [leg] = services.transfer_legs_open(call=call, sip_call_ids={target: sip_call_id})
    if answered:
        services.dial_leg_bridged(leg=leg)
        for phone in Leg.objects.filter(call=call, role=LegRole.FORWARD_TARGET):
            services.leg_ended(leg=phone)
    return leg


def test_a_call_handed_on_may_be_handed_on_again_but_not_while_its_target_rings(client_jwt, number):
    call = inbound_call(number)
    transferred(call)
    channel = listening(call)
    url = f"/api/calls/{call.pk}/transfer"
    again = client_jwt.post(url, {"to": SECOND}, format="json")
    assert again.status_code == 202, again.json()
    assert told(channel) == {"type": "call.transfer", "to": SECOND}

    transferred(call, SECOND, answered=False)  # the second transfer's target rings
    ringing = client_jwt.post(url, {"to": TARGET}, format="json")
    assert ringing.status_code == 409, ringing.json()
    assert ringing.json()["code"] == "call_not_transferable"


def browser_call(user, **fields) -> Call:
    """An outbound call of `user` placed from the browser, answered (in progress)."""
    fields = {"rtc_offer": "v=0", "message": "", "status": CallState.IN_PROGRESS, **fields}
    return CallFactory(owner=user, **fields)


def test_a_call_from_the_browser_is_transferred_by_its_call_id_or_its_id(client_jwt, user):
    call = browser_call(user)
    channel = listening(call)
    for ref in (call.call_id, call.pk):
        response = client_jwt.post(f"/api/calls/{ref}/transfer", {"to": TARGET}, format="json")
        assert response.status_code == 202, response.json()
        assert response.json() == {"call": str(call.pk), "to": TARGET, "status": "transferring"}
        assert told(channel) == {"type": "call.transfer", "to": TARGET}


def test_outbound_calls_that_play_text_ringing_or_transferring_are_409(client_jwt, user):
    handing_on = browser_call(user)
    transferred(handing_on, answered=False)  # its target rings
    message = CallFactory(owner=user, status=CallState.IN_PROGRESS)  # plays text: no bridge
    ringing = browser_call(user, status=CallState.RINGING)
    for call in (message, ringing, handing_on):
        response = client_jwt.post(
            f"/api/calls/{call.call_id}/transfer", {"to": TARGET}, format="json"
        )
        assert response.status_code == 409, (call.call_id, response.json())
        assert response.json()["code"] == "call_not_transferable"


def test_another_users_call_from_the_browser_is_404(client_jwt):
    call = browser_call(UserFactory())
    for ref in (call.call_id, call.pk):
        response = client_jwt.post(f"/api/calls/{ref}/transfer", {"to": TARGET}, format="json")
        assert response.status_code == 404, response.json()


async def test_the_socket_frame_names_a_call_from_the_browser_by_its_call_id(communicator, user):
    call = await sync_to_async(browser_call)(user, call_id="web-7")
    layer = get_channel_layer()
    agent = await layer.new_channel()
    await layer.group_add(events.call_group(call.pk), agent)
    ws, accepted = await communicator(user)
    assert accepted
    await ws.send_json_to({"type": "call_transfer", "callId": "web-7", "to": TARGET})
    assert await ws.receive_json_from(timeout=5) == {
        "type": "call_transfer",
        "call": str(call.pk),
        "callId": "web-7",
        "to": TARGET,
        "status": "transferring",
    }
    async with asyncio.timeout(5):
        assert await layer.receive(agent) == {"type": "call.transfer", "to": TARGET}


def test_the_record_names_the_last_target_that_took_the_call_else_the_last_tried(number):
    def transferred_to(call) -> str | None:
        [row] = record_rows(Call.objects.filter(pk=call.pk))
        return row["transferred_to"]

    call = inbound_call(number)
    transferred(call)  # TARGET took it
    services.leg_ended(leg=transferred(call, SECOND, answered=False))  # SECOND did not
    assert transferred_to(call) == TARGET
    taken = transferred(call, SECOND)  # handed on to SECOND again, which took it this time
    assert transferred_to(call) == SECOND
    services.leg_ended(leg=taken)  # over (the plan's legs at once are few)

    untaken = inbound_call(NumberFactory(owner=number.owner, forward_targets=[PHONE]))
    for target in (TARGET, SECOND):
        services.leg_ended(leg=transferred(untaken, target, answered=False))
    assert transferred_to(untaken) == SECOND
