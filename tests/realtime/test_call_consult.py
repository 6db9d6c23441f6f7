"""An attended transfer's frames on the socket (issue 58): `call_consult`,
`call_consult_complete` and `call_consult_cancel` from a tab that took a ring are checked as
`call_transfer` is (who may, which call, what `to`, the call's state) and go to the ring's
agent, played here by the test (tests.realtime.test_phone_frames.Agent); every refusal is an
error frame and the socket stays open. The consultation itself, with a live agent, Chromium
and SIPp, is in tests/console/test_browser_phone.py."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call, LegRole
from realtime.services import call_transfer
from telephony import services
from tests.factories import NumberFactory, UserFactory
from tests.realtime.test_phone_frames import Agent, phone_on, ring_frame

pytestmark = pytest.mark.django_db(transaction=True)

TARGET = "+441134960300"
RING = "ring-0123456789abcdef"


def taken_by_a_tab(number) -> Call:
    """An inbound call to `number`, taken by a tab of its owner's (the ledger's services)."""
    call = services.inbound_call_open(
        sip_call_id=f"{number.pk}@test", number=number, caller_num="+447700900123", ringing=False
    )
    services.forward_browser_bridged(call=call)
    return Call.objects.get(pk=call.pk)


def consult_leg(call: Call, *, answered: bool):
    """The consultation's leg, as the agent writes it when it dials the target."""
    [leg] = services.consult_legs_open(call=call, sip_call_ids={TARGET: f"c-{call.pk}@test"})
    if answered:
        services.dial_leg_bridged(leg=leg)
    return leg


async def rung(communicator, user, call: Call):
    """A socket of `user` with its phone on, rung for `call` by the agent (and taken)."""
    ws, _ = await communicator(user)
    await phone_on(ws)
    agent = await Agent.make()
    await agent.ring(user, {**ring_frame(RING), "call": str(call.pk)})
    assert (await ws.receive_json_from(timeout=5))["ring"] == RING
    tab = (await agent.next())["tab"]
    return ws, agent, tab


async def reply_to(ws, frame: dict) -> dict:
    await ws.send_json_to(frame)
    return await ws.receive_json_from(timeout=5)


async def test_consult_complete_and_cancel_go_to_the_rings_agent(communicator, user):
    number = await sync_to_async(NumberFactory)(owner=user, forward_targets=["browser"])
    call = await sync_to_async(taken_by_a_tab)(number)
    ws, agent, tab = await rung(communicator, user, call)
    named = {"call": str(call.pk), "ring": RING}

    consulting = await reply_to(ws, {"type": "call_consult", **named, "to": TARGET})
    assert consulting == {"type": "call_consult", **named, "to": TARGET, "status": "consulting"}
    assert await agent.next() == {"type": "rtc.consult", "to": TARGET, "tab": tab}

    # The agent dials: until the target answers only Cancel is possible; a transfer or a
    # second consultation meanwhile is refused.
    leg = await sync_to_async(consult_leg)(call, answered=False)
    early = await reply_to(ws, {"type": "call_consult_complete", **named})
    assert (early["type"], early["code"], early["ring"]) == ("error", "consult_not_answered", RING)
    again = await reply_to(ws, {"type": "call_consult", **named, "to": TARGET})
    assert again["code"] == "call_not_transferable"
    transfer = await reply_to(ws, {"type": "call_transfer", **named, "to": TARGET})
    assert transfer["code"] == "call_not_transferable"
    canceling = await reply_to(ws, {"type": "call_consult_cancel", **named})
    assert canceling == {"type": "call_consult_cancel", **named, "status": "canceling"}
    assert await agent.next() == {"type": "rtc.consult_cancel", "tab": tab}

    await sync_to_async(services.leg_ended)(leg=leg)  # back to the caller: another may follow
    assert (await reply_to(ws, {"type": "call_consult", **named, "to": TARGET}))["status"] == (
        "consulting"
    )
    assert (await agent.next())["type"] == "rtc.consult"
    await sync_to_async(consult_leg)(call, answered=True)
    completing = await reply_to(ws, {"type": "call_consult_complete", **named})
    assert completing == {"type": "call_consult_complete", **named, "status": "completing"}
    assert await agent.next() == {"type": "rtc.consult_complete", "tab": tab}
    assert await agent.nothing_within(0.2)


async def test_bad_consultation_frames_get_error_frames_and_the_socket_stays(communicator, user):
    number = await sync_to_async(NumberFactory)(owner=user, forward_targets=["browser"])
    call = await sync_to_async(taken_by_a_tab)(number)
    stranger = await sync_to_async(NumberFactory)(owner=await sync_to_async(UserFactory)())
    theirs = await sync_to_async(taken_by_a_tab)(stranger)
    ws, agent, _ = await rung(communicator, user, call)
    named = {"call": str(call.pk), "ring": RING}

    cases = [
        ({"type": "call_consult", "call": str(call.pk), "to": TARGET}, "invalid_request", "ring"),
        ({"type": "call_consult", **named, "ring": "ring-ffffffffffffffff", "to": TARGET},
         "not_found", None),
        ({"type": "call_consult", **named, "call": str(theirs.pk), "to": TARGET},
         "not_found", None),  # another user's call: as an unknown one
        ({"type": "call_consult", **named, "call": "no-such-call", "to": TARGET},
         "not_found", None),
        ({"type": "call_consult", **named}, "invalid_request", "to"),
        ({"type": "call_consult", **named, "to": "0113 496 0300"}, "invalid_request", "to"),
        ({"type": "call_consult", **named, "to": "+33123456789"}, "destination_not_allowed",
         "to"),
        ({"type": "call_consult_complete", **named}, "no_consult", None),
        ({"type": "call_consult_cancel", **named}, "no_consult", None),
        ({"type": "call_consult_cancel", **named, "call": str(theirs.pk)}, "not_found", None),
    ]  # fmt: skip
    for frame, code, field in cases:
        refused = await reply_to(ws, frame)
        assert (refused["type"], refused["code"]) == ("error", code), (frame, refused)
        if field is not None:
            assert field in refused["fields"], refused
    assert await agent.nothing_within(0.2)  # nothing refused reached the agent
    assert (await reply_to(ws, {"type": "ping"}))["type"] == "pong"


async def test_only_a_call_a_tab_took_and_still_bridged_may_be_consulted(communicator, user):
    number = await sync_to_async(NumberFactory)(owner=user, forward_targets=["browser"])
    call = await sync_to_async(taken_by_a_tab)(number)
    ws, agent, _ = await rung(communicator, user, call)
    named = {"call": str(call.pk), "ring": RING}
    # Transferred already (a consultation completed, or a blind transfer): no more.
    await sync_to_async(call_transfer)(user=user, call_ref=str(call.pk), data={"to": TARGET})
    [leg] = await sync_to_async(services.transfer_legs_open)(
        call=call, sip_call_ids={TARGET: f"t-{call.pk}@test"}
    )
    assert leg.role == LegRole.TRANSFER_TARGET
    refused = await reply_to(ws, {"type": "call_consult", **named, "to": TARGET})
    assert refused["code"] == "call_not_transferable"
    assert await agent.nothing_within(0.2)
