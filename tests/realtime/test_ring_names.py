"""Issue 54's "one name per meaning" on the browser phone's rings: a ring is named `ring` in
every frame about it, both ways, and Relay's frames about it carry `call` (the inbound call's
ledger id) too. `callId` is a client's id of a call it placed, so on a ring's frames it is
deprecated: Relay's repeat the ring in it for one release, and a tab's may still name the ring
by it (a frame naming both must name the same ring). The agent's side is the test's
(tests.realtime.test_phone_frames.Agent), but in the first test, where telephony's own ring
runs in this process."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from telephony.inbound.forwarding import Forwarder
from telephony.services import inbound_call_open
from tests.factories import CallFactory, NumberFactory
from tests.realtime.test_phone_frames import CANDIDATE, Agent, phone_on, ring_frame
from tests.telephony.browser_peer import an_offer

pytestmark = pytest.mark.django_db(transaction=True)

RING = "ring-0123456789abcdef"
OTHER_RING = "ring-fedcba9876543210"


def ring_of_a_forwarded_call(number, call):
    """telephony's ring of the owner's tabs for `call`, as forwarding makes it."""
    forwarder = Forwarder(
        ua=SimpleNamespace(config=SimpleNamespace(rtc_ports=None)),
        db=None,
        speech=None,
        call=SimpleNamespace(sip_call_id="a-ring@test"),
        number=number,
        ledger=call,
        record=None,
        leg_done=None,
    )
    return forwarder._browser_ring(number.owner_id)


async def test_relays_frames_about_a_ring_carry_ring_call_and_callid_repeating_the_ring(
    communicator, user
):
    number = await sync_to_async(NumberFactory)(owner=user, alias="Shop")
    call = await sync_to_async(inbound_call_open)(
        sip_call_id="a-ring@test", number=number, caller_num="+447700900123", ringing=False
    )
    answering, _ = await communicator(user)
    other, _ = await communicator(user)
    for ws in (answering, other):
        await phone_on(ws)
    ring = ring_of_a_forwarded_call(number, call)
    ringing = asyncio.ensure_future(ring.ring(30))
    closed = False
    try:
        incoming = await answering.receive_json_from(timeout=5)
        assert await other.receive_json_from(timeout=5) == incoming
        name = incoming["ring"]
        assert re.fullmatch(r"ring-[0-9a-f]{16}", name)
        assert (incoming["type"], incoming["ringBrowser"], incoming["alias"]) == (
            "incoming_call",
            True,
            "Shop",
        )
        assert (incoming["call"], incoming["seq"], incoming["callId"]) == (str(call.pk), 1, name)
        about = {"ring": name, "call": str(call.pk), "callId": name}

        await answering.send_json_to({"type": "rtc_offer", "ring": name, "sdp": await an_offer()})
        answer = await answering.receive_json_from(timeout=20)
        assert answer == {"type": "rtc_answer", **about, "sdp": answer["sdp"]}
        stopped = await other.receive_json_from(timeout=5)
        assert stopped == {"type": "rtc_hangup", **about, "reason": "answered_elsewhere"}

        ring.hang_up()
        assert await ringing is False  # never connected: the offer's browser is gone
        await ring.close("caller_hung_up")
        closed = True
        ended = await answering.receive_json_from(timeout=5)
        assert ended == {"type": "rtc_hangup", **about, "reason": "caller_hung_up"}
    finally:
        ringing.cancel()
        if not closed:
            await ring.close("caller_hung_up")


async def rung(communicator, user, agent: Agent, ring: str = RING):
    """A socket of `user` whose phone is on, rung by `agent`; and its tab's channel."""
    ws, _ = await communicator(user)
    await phone_on(ws)
    await agent.ring(user, ring_frame(ring))
    assert (await ws.receive_json_from(timeout=5))["ring"] == ring
    return ws, (await agent.next())["tab"]


async def leaves(ws, agent: Agent, *rings: str) -> None:
    """The tab leaves its `rings`, and the agent hears it. A test ends so, not with the
    socket in a ring: its disconnect at teardown would send the agent rtc.hangup, and the
    Redis layer's clean-up of that message could outlive the test's event loop (its lock
    then refuses every later receive: "bound to a different event loop")."""
    for ring in rings:
        await ws.send_json_to({"type": "rtc_hangup", "ring": ring})
        assert (await agent.next())["type"] == "rtc.hangup"


@pytest.mark.parametrize(
    "names",
    [{"ring": RING}, {"callId": RING}, {"ring": RING, "callId": RING}],
    ids=["ring", "deprecated-callid", "both"],
)
async def test_a_tab_answers_trickles_keys_and_hangs_up_a_ring_by_its_name(
    communicator, user, names
):
    agent = await Agent.make()
    ws, tab = await rung(communicator, user, agent)

    offer = await an_offer()
    await ws.send_json_to({"type": "rtc_offer", **names, "sdp": offer})
    assert await agent.next() == {"type": "rtc.offer", "sdp": offer, "tab": tab}
    await ws.send_json_to({"type": "rtc_candidate", **names, "candidate": CANDIDATE})
    assert await agent.next() == {
        "type": "rtc.candidate",
        "candidate": CANDIDATE,
        "sdpMid": None,
        "tab": tab,
    }
    await ws.send_json_to({"type": "rtc_dtmf", **names, "digits": "5*"})
    assert await agent.next() == {"type": "rtc.dtmf", "digits": "5*", "tab": tab}
    await ws.send_json_to({"type": "rtc_hold", **names, "hold": True})
    assert await agent.next() == {"type": "rtc.hold", "hold": True, "tab": tab}
    await ws.send_json_to({"type": "rtc_hangup", **names})
    assert await agent.next() == {"type": "rtc.hangup", "tab": tab}

    # Left, the ring is no longer the tab's.
    await ws.send_json_to({"type": "rtc_dtmf", **names, "digits": "1"})
    reply = await ws.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "not_found")
    assert await agent.nothing_within(0.2)


KINDS = [
    {"type": "rtc_offer", "sdp": "v=0"},
    {"type": "rtc_candidate", "candidate": CANDIDATE},
    {"type": "rtc_dtmf", "digits": "1"},
    {"type": "rtc_hold", "hold": True},
    {"type": "rtc_hangup"},
]


async def refused(ws, frame: dict, code: str) -> dict:
    """The error frame answering `frame`; the socket stays open."""
    await ws.send_json_to(frame)
    reply = await ws.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", code), (frame, reply)
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"
    return reply


@pytest.mark.parametrize("call_id", [OTHER_RING, "b1", 5, None])
async def test_a_frame_whose_ring_and_callid_disagree_is_refused_naming_both(
    communicator, user, call_id
):
    agent = await Agent.make()
    ws, _ = await communicator(user)
    await phone_on(ws)
    for ring in (RING, OTHER_RING):
        await agent.ring(user, ring_frame(ring))
        await ws.receive_json_from(timeout=5)
        await agent.next()
    for kind in KINDS:
        frame = {**kind, "ring": RING, "callId": call_id}
        reply = await refused(ws, frame, "invalid_request")
        assert set(reply["fields"]) == {"ring", "callId"}
        assert "deprecated" in reply["error"]
        assert reply["ring"] == RING
    assert await agent.nothing_within(0.3)
    await leaves(ws, agent, RING, OTHER_RING)


@pytest.mark.parametrize(
    "ring",
    [
        5,
        None,
        True,
        [RING],
        {"ring": RING},
        "",
        "ring-\x00",
        "ring-\ud800",
        "ring-\n",
        "r" * 60_000,
    ],
    ids=[
        "number",
        "null",
        "bool",
        "list",
        "object",
        "empty",
        "nul",
        "surrogate",
        "control",
        "huge",
    ],
)
async def test_a_bad_ring_gets_an_invalid_request_naming_ring_and_the_socket_stays(
    communicator, user, ring
):
    agent = await Agent.make()
    ws, _ = await rung(communicator, user, agent)

    for kind in KINDS:
        reply = await refused(ws, {**kind, "ring": ring}, "invalid_request")
        assert list(reply["fields"]) == ["ring"]
        assert "ring" not in reply  # nothing unacceptable is echoed
    assert await agent.nothing_within(0.3)
    await leaves(ws, agent, RING)


async def test_an_offer_with_a_ring_and_a_to_is_refused_naming_ring(communicator, user):
    agent = await Agent.make()
    ws, _ = await rung(communicator, user, agent)

    frame = {"type": "rtc_offer", "ring": RING, "to": "+442079460123", "sdp": await an_offer()}
    reply = await refused(ws, frame, "invalid_request")

    assert list(reply["fields"]) == ["ring"] and reply["ring"] == RING
    assert await agent.nothing_within(0.3)
    assert not await sync_to_async(Call.objects.exists)()  # no call placed either
    await leaves(ws, agent, RING)


async def test_a_ring_another_socket_or_user_was_sent_is_not_found(communicator, user, other_user):
    mine, theirs = await Agent.make(), await Agent.make()
    ws, _ = await rung(communicator, user, mine, RING)
    their_ws, _ = await rung(communicator, other_user, theirs, OTHER_RING)
    unrung, _ = await communicator(user)  # the same user's, its phone off

    for socket, ring in ((ws, OTHER_RING), (their_ws, RING), (unrung, RING), (ws, "ring-0")):
        for kind in KINDS:
            reply = await refused(socket, {**kind, "ring": ring}, "not_found")
            assert (reply["ring"], list(reply["fields"])) == (ring, ["ring"])
    assert await mine.nothing_within(0.2)
    assert await theirs.nothing_within(0.2)
    await leaves(ws, mine, RING)
    await leaves(their_ws, theirs, OTHER_RING)


async def test_a_ring_never_names_a_call_placed_from_the_browser(communicator, user):
    call = await sync_to_async(CallFactory)(
        owner=user, call_id="ring-b1", rtc_offer=await an_offer()
    )
    ws, _ = await communicator(user)

    for kind in KINDS[1:]:  # an rtc_offer with a ring answers one: it places nothing
        reply = await refused(ws, {**kind, "ring": "ring-b1"}, "not_found")
        assert reply["ring"] == "ring-b1"

    await sync_to_async(call.refresh_from_db)()
    assert call.status == "queued"  # not cancelled by the ring's name


async def test_an_agent_that_names_its_ring_by_callid_alone_still_reaches_the_tab_with_ring(
    communicator, user
):
    """An agent of the release before (a rolling upgrade): its frames name the ring by callId;
    the socket adds `ring`, so that a tab of this release knows the ring."""
    agent = await Agent.make()
    ws, _ = await communicator(user)
    await phone_on(ws)
    old = {key: value for key, value in ring_frame().items() if key not in ("ring", "call")}

    await agent.ring(user, old)
    assert await ws.receive_json_from(timeout=5) == {**old, "ring": RING}
    tab = (await agent.next())["tab"]
    await agent.tell(tab, {"type": "rtc_hangup", "callId": RING, "reason": "no_answer"})
    ended = await ws.receive_json_from(timeout=5)
    assert ended == {"type": "rtc_hangup", "callId": RING, "reason": "no_answer", "ring": RING}
    reply = await refused(ws, {"type": "rtc_hangup", "ring": RING}, "not_found")  # it ended
    assert reply["fields"]["ring"]
