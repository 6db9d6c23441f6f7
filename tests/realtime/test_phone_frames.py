"""The browser phone's frames on the socket (issue 43), against the agent's side of the
channel layer played by the test: `phone` puts a socket in its owner's phone group; a ring
(`rtc.probe`, as telephony.webrtc.ring sends it) reaches the sockets whose phone is on, each
saying back that it rings; then the tab's `rtc_offer`, `rtc_candidate` and `rtc_hangup` go to
the agent's channel, and only from a socket that was rung. No agent runs here."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer

from core import events
from tests.telephony.browser_peer import an_offer

pytestmark = pytest.mark.django_db(transaction=True)

CANDIDATE = "candidate:842163049 1 udp 1677729535 192.0.2.7 46154 typ srflx raddr 0.0.0.0 rport 0"


CALL = "6f1c2a4e-8d2b-4f4e-9a51-3c7e0b9d1a22"  # the inbound call's ledger id


def ring_frame(ring: str = "ring-0123456789abcdef") -> dict:
    """The `incoming_call` an agent rings tabs with: the ring named by `ring`, the call by
    `call`, and `callId` (deprecated) repeating the ring."""
    return {
        "type": "incoming_call",
        "call": CALL,
        "seq": 1,
        "number_id": "n1",
        "number": "+447700900123",
        "caller_num": "+441134960000",
        "ts": 1,
        "ring": ring,
        "callId": ring,
        "alias": "Shop",
        "ringBrowser": True,
    }


class Agent:
    """The agent's end of a ring: a channel of its own, and what reaches it."""

    def __init__(self, layer, channel: str) -> None:
        self.layer, self.channel = layer, channel

    @classmethod
    async def make(cls) -> Agent:
        layer = get_channel_layer()
        return cls(layer, await layer.new_channel())

    async def ring(self, user, frame: dict) -> None:
        probe = {"type": "rtc.probe", "reply": self.channel, "event": frame}
        await self.layer.group_send(events.phone_group(user.pk), probe)

    async def next(self, timeout: float = 5) -> dict:
        async with asyncio.timeout(timeout):
            return await self.layer.receive(self.channel)

    async def nothing_within(self, seconds: float) -> bool:
        try:
            await self.next(seconds)
        except TimeoutError:
            return True
        return False

    async def tell(self, tab: str, frame: dict) -> None:
        await self.layer.send(tab, {"type": "rtc.event", "event": frame})


async def phone_on(ws) -> None:
    await ws.send_json_to({"type": "phone", "on": True})
    assert await ws.receive_json_from(timeout=5) == {"type": "phone", "on": True}


async def test_a_ring_reaches_the_tabs_whose_phone_is_on_and_the_first_offer_goes_to_the_agent(
    communicator, user
):
    on, _ = await communicator(user)
    off, _ = await communicator(user)
    await phone_on(on)
    agent = await Agent.make()

    await agent.ring(user, ring_frame())

    assert await on.receive_json_from(timeout=5) == ring_frame()
    ringing = await agent.next()
    assert ringing["type"] == "rtc.ringing"
    assert await off.receive_nothing(timeout=0.3)  # its phone is off: it does not ring
    assert await agent.nothing_within(0.2)  # one socket rings, one said so

    offer = await an_offer()
    await on.send_json_to({"type": "rtc_offer", "callId": "ring-0123456789abcdef", "sdp": offer})
    assert await agent.next() == {"type": "rtc.offer", "sdp": offer, "tab": ringing["tab"]}

    await on.send_json_to(
        {"type": "rtc_candidate", "callId": "ring-0123456789abcdef", "candidate": CANDIDATE,
         "sdpMid": "0"}
    )  # fmt: skip
    assert await agent.next() == {
        "type": "rtc.candidate",
        "candidate": CANDIDATE,
        "sdpMid": "0",
        "tab": ringing["tab"],
    }

    await on.send_json_to({"type": "rtc_dtmf", "callId": "ring-0123456789abcdef", "digits": "12#"})
    assert await agent.next() == {"type": "rtc.dtmf", "digits": "12#", "tab": ringing["tab"]}

    # The agent's frames reach that tab; a ring it ended is no longer the tab's.
    ring = "ring-0123456789abcdef"
    ended = {"type": "rtc_hangup", "ring": ring, "call": CALL, "callId": ring, "reason": "ended"}
    await agent.tell(ringing["tab"], ended)
    assert await on.receive_json_from(timeout=5) == ended
    await on.send_json_to({"type": "rtc_hangup", "callId": "ring-0123456789abcdef"})
    reply = await on.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "not_found")  # neither ring nor call


async def test_another_users_socket_is_never_rung_and_its_frames_for_the_ring_are_refused(
    communicator, user, other_user
):
    mine, _ = await communicator(user)
    theirs, _ = await communicator(other_user)
    await phone_on(mine)
    await phone_on(theirs)
    agent = await Agent.make()

    await agent.ring(user, ring_frame())
    assert (await mine.receive_json_from(timeout=5))["callId"] == "ring-0123456789abcdef"
    await agent.next()  # mine rings
    assert await theirs.receive_nothing(timeout=0.3)

    offer = await an_offer()
    for frame in (
        {"type": "rtc_offer", "callId": "ring-0123456789abcdef", "sdp": offer},
        {"type": "rtc_candidate", "callId": "ring-0123456789abcdef", "candidate": CANDIDATE},
    ):
        await theirs.send_json_to(frame)
        reply = await theirs.receive_json_from(timeout=5)
        assert (reply["type"], reply["code"], reply["callId"]) == (
            "error",
            "not_found",
            "ring-0123456789abcdef",
        )
    assert await agent.nothing_within(0.3)


async def test_declining_switching_off_or_closing_leaves_the_ring(communicator, user):
    agent = await Agent.make()
    tabs = []
    for _ in range(3):
        ws, _ = await communicator(user)
        await phone_on(ws)
        tabs.append(ws)
    await agent.ring(user, ring_frame())
    rung = {(await agent.next())["tab"] for _ in tabs}
    assert len(rung) == 3
    for ws in tabs:
        await ws.receive_json_from(timeout=5)

    declines, switches, closes = tabs
    await declines.send_json_to({"type": "rtc_hangup", "callId": "ring-0123456789abcdef"})
    await switches.send_json_to({"type": "phone", "on": False})
    assert await switches.receive_json_from(timeout=5) == {"type": "phone", "on": False}
    await closes.disconnect()
    left = [await agent.next() for _ in range(3)]
    assert {m["type"] for m in left} == {"rtc.hangup"}
    assert {m["tab"] for m in left} == rung

    # Switched off, it is rung no more.
    await agent.ring(user, ring_frame("ring-fedcba9876543210"))
    assert await declines.receive_json_from(timeout=5) == ring_frame("ring-fedcba9876543210")
    assert await switches.receive_nothing(timeout=0.3)


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        ({"type": "phone"}, "on"),
        ({"type": "phone", "on": "yes"}, "on"),
        ({"type": "rtc_candidate", "callId": "ring-0123456789abcdef", "candidate": "x"}, None),
        ({"type": "rtc_candidate", "callId": 5, "candidate": CANDIDATE}, "callId"),
        ({"type": "rtc_offer", "callId": "ring-\ud800", "sdp": "v=0"}, None),
        ({"type": "rtc_dtmf", "callId": "ring-0123456789abcdef", "digits": "1"}, None),
        ({"type": "rtc_hold", "ring": "ring-0123456789abcdef", "hold": True}, "ring"),
        ({"type": "rtc_hold", "callId": "web-7", "hold": False}, None),
        ({"type": "rtc_hold", "ring": "ring-\x00", "hold": True}, "ring"),
        ({"type": "rtc_hold", "hold": True}, "callId"),
    ],
    ids=[
        "phone-no-on",
        "phone-not-bool",
        "candidate-unknown-ring",
        "callid-number",
        "surrogate",
        "dtmf-unknown-ring",
        "hold-unknown-ring",
        "hold-unknown-call",
        "hold-nul-ring",
        "hold-no-call",
    ],
)
async def test_bad_phone_frames_get_an_error_frame_and_the_socket_stays(
    communicator, user, frame, field
):
    ws, _ = await communicator(user)

    await ws.send_json_to(frame)

    reply = await ws.receive_json_from(timeout=5)
    assert reply["type"] == "error"
    assert reply["code"] in ("invalid_request", "not_found")
    if field:
        assert field in reply["fields"]
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"


@pytest.mark.parametrize(
    ("candidate", "mid"),
    [
        ("candidate:1 1 udp 1 192.0.2.1 1 typ nonsense", None),
        ("candidate:" + "1" * 2000, None),
        (CANDIDATE + "\x00", None),
        (7, None),
        (CANDIDATE, "x" * 40),
        (CANDIDATE, 3),
    ],
    ids=["bad-type", "huge", "nul", "number", "long-mid", "mid-number"],
)
async def test_a_hostile_candidate_is_refused_before_the_agent(communicator, user, candidate, mid):
    ws, _ = await communicator(user)
    await phone_on(ws)
    agent = await Agent.make()
    await agent.ring(user, ring_frame())
    await ws.receive_json_from(timeout=5)
    await agent.next()

    frame = {"type": "rtc_candidate", "callId": "ring-0123456789abcdef", "candidate": candidate}
    if mid is not None:
        frame["sdpMid"] = mid
    await ws.send_json_to(frame)

    reply = await ws.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "invalid_request")
    assert "candidate" in reply["fields"]
    assert await agent.nothing_within(0.3)


@pytest.mark.parametrize("digits", ["", "1" * 33, "x", "1\x00", 5, None, "a"])
async def test_keys_that_are_no_keypads_are_refused_before_the_agent(communicator, user, digits):
    ws, _ = await communicator(user)
    await phone_on(ws)
    agent = await Agent.make()
    await agent.ring(user, ring_frame())
    await ws.receive_json_from(timeout=5)
    await agent.next()

    await ws.send_json_to({"type": "rtc_dtmf", "callId": "ring-0123456789abcdef", "digits": digits})

    reply = await ws.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "invalid_request")
    assert "digits" in reply["fields"]
    assert await agent.nothing_within(0.3)


async def test_hold_and_resume_go_to_the_agent_of_the_ring_and_its_answer_to_the_tab(
    communicator, user
):
    ws, _ = await communicator(user)
    await phone_on(ws)
    agent = await Agent.make()
    await agent.ring(user, ring_frame())
    await ws.receive_json_from(timeout=5)
    tab = (await agent.next())["tab"]

    for hold in (True, False):
        await ws.send_json_to({"type": "rtc_hold", "ring": "ring-0123456789abcdef", "hold": hold})
        assert await agent.next() == {"type": "rtc.hold", "hold": hold, "tab": tab}
    # The agent's answer (telephony.webrtc.leg.BrowserLeg.held_by_tab) reaches the tab as is.
    answer = {"type": "rtc_hold", "ring": "ring-0123456789abcdef", "call": CALL, "hold": True}
    await agent.tell(tab, answer)
    assert await ws.receive_json_from(timeout=5) == answer


@pytest.mark.parametrize(
    "hold",
    ["true", 1, None, [], {"deep": [[[]]]}, 10**400],
    ids=["string", "number", "missing", "list", "nested", "huge"],
)
async def test_a_hold_that_is_no_boolean_is_refused_before_the_agent(communicator, user, hold):
    ws, _ = await communicator(user)
    await phone_on(ws)
    agent = await Agent.make()
    await agent.ring(user, ring_frame())
    await ws.receive_json_from(timeout=5)
    await agent.next()

    frame = {"type": "rtc_hold", "ring": "ring-0123456789abcdef"}
    if hold is not None:
        frame["hold"] = hold
    await ws.send_json_to(frame)

    reply = await ws.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "invalid_request")
    if hold != 10**400:  # a number past JSON's limits is refused as the frame is read
        assert reply["ring"] == "ring-0123456789abcdef"
        assert "hold" in reply["fields"]
    assert await agent.nothing_within(0.3)
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"


async def test_another_users_tab_cannot_hold_the_ring(communicator, user, other_user):
    mine, _ = await communicator(user)
    theirs, _ = await communicator(other_user)
    await phone_on(mine)
    agent = await Agent.make()
    await agent.ring(user, ring_frame())
    await mine.receive_json_from(timeout=5)
    await agent.next()

    await theirs.send_json_to({"type": "rtc_hold", "ring": "ring-0123456789abcdef", "hold": True})

    reply = await theirs.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "not_found")
    assert await agent.nothing_within(0.3)
