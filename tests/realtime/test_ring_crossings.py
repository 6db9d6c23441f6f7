"""A tab's reply to a ring crossing the ring's end (issue 57): the agent's side is a real
telephony.webrtc.ring.BrowserRing, the tab a socket on relay.asgi. A ring ends when another
entry of the ring list answers (dial hangs it up, then closes it `answered_elsewhere`) or the
caller hangs up (`caller_hung_up`), whenever that falls against the socket's `rtc.ringing`
or the tab's `rtc_offer`: the tab is told `rtc_hangup` with the reason once, and never rings
on."""

from __future__ import annotations

import asyncio
import time

import pytest

from telephony.webrtc.ring import BrowserRing
from tests.realtime.test_phone_frames import CALL, phone_on, ring_frame
from tests.telephony.browser_peer import an_offer

pytestmark = pytest.mark.django_db(transaction=True)

RING = "ring-0123456789abcdef"


def a_ring(user) -> BrowserRing:
    return BrowserRing(owner_id=user.pk, frame=ring_frame(RING), ice_servers=[], ports=None,
                       label="test ring")  # fmt: skip


def hangup(reason: str) -> dict:
    return {"type": "rtc_hangup", "ring": RING, "call": CALL, "callId": RING, "reason": reason}


async def until(condition, *, deadline: float = 5) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "not within the deadline"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("reason", ["answered_elsewhere", "caller_hung_up"])
async def test_a_tab_whose_ringing_crosses_the_rings_end_is_told_it_is_over(
    communicator, user, reason
):
    tab, _ = await communicator(user)
    await phone_on(tab)
    ring = a_ring(user)
    # Another entry answers (or the caller hangs up) as the probe goes out: the ring is over
    # before the socket's rtc.ringing can reach it, as dial does it (hang_up, then close).
    ring.hang_up()
    assert await ring.ring(20) is False
    await ring.close(reason)
    assert not ring.tabs  # the ring never heard the tab say it rings

    assert await tab.receive_json_from(timeout=5) == ring_frame(RING)
    assert await tab.receive_json_from(timeout=5) == hangup(reason)
    assert await tab.receive_nothing(timeout=0.3)  # told once
    await tab.send_json_to({"type": "rtc_offer", "ring": RING, "sdp": await an_offer()})
    reply = await tab.receive_json_from(timeout=5)
    assert (reply["type"], reply["code"]) == ("error", "not_found")  # no longer its ring


@pytest.mark.parametrize("reason", ["answered_elsewhere", "caller_hung_up"])
async def test_a_tabs_offer_that_crosses_the_rings_end_has_it_told_once(communicator, user, reason):
    tab, _ = await communicator(user)
    await phone_on(tab)
    ring = a_ring(user)
    ringing = asyncio.create_task(ring.ring(20))
    assert await tab.receive_json_from(timeout=5) == ring_frame(RING)
    await until(lambda: ring.tabs)  # the ring heard the tab say it rings

    ring.hang_up()  # another entry took the call, or the caller left ...
    await tab.send_json_to({"type": "rtc_offer", "ring": RING, "sdp": await an_offer()})
    assert await ringing is False
    await ring.close(reason)  # ... and the tab's offer crosses the close

    assert await tab.receive_json_from(timeout=5) == hangup(reason)
    assert await tab.receive_nothing(timeout=0.3)  # told once, by the ring, not the group too


async def test_a_socket_whose_phone_came_on_after_the_probe_is_told_nothing(communicator, user):
    rung, _ = await communicator(user)
    later, _ = await communicator(user)
    await phone_on(rung)
    ring = a_ring(user)
    ring.hang_up()
    assert await ring.ring(20) is False
    assert await rung.receive_json_from(timeout=5) == ring_frame(RING)
    await phone_on(later)  # in the phone group once the ring was asked for: not rung

    await ring.close("answered_elsewhere")

    assert await rung.receive_json_from(timeout=5) == hangup("answered_elsewhere")
    assert await later.receive_nothing(timeout=0.3)
