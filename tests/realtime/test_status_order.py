"""One socket's order of a call's states (realtime.ordering): whatever order the frames reach
the socket in, they leave it in the order of the call's states, and none waits for long."""

from __future__ import annotations

import asyncio

import pytest

from realtime.ordering import StatusOrder

pytestmark = pytest.mark.timeout(30)


def status(call_id: str, state: str) -> dict:
    return {"type": "call_status", "callId": call_id, "status": state, "ts": 1}


OPENED = 1_000  # when the socket joined its groups (ms)
NEW, OLD = OPENED + 5, OPENED - 5  # a call created after it, and one created before


class Socket:
    def __init__(self, hold: float = 5.0):
        self.frames: list[tuple[str, str]] = []
        self.order = StatusOrder(self.send, opened_ms=OPENED, hold=hold)

    async def send(self, event: dict) -> None:
        self.frames.append((event["callId"], event["status"]))


async def test_a_later_state_that_comes_first_waits_for_queued_then_both_go_in_order():
    socket = Socket()
    await socket.order.arrived(status("a", "dialing"), created_ms=NEW)
    await socket.order.arrived(status("a", "ringing"), created_ms=NEW)
    assert socket.frames == []  # held: queued may be on its way
    await socket.order.arrived(status("a", "queued"), created_ms=NEW)
    assert socket.frames == [("a", "queued"), ("a", "dialing"), ("a", "ringing")]
    await socket.order.arrived(status("a", "completed"), created_ms=NEW)
    assert socket.frames[-1] == ("a", "completed")
    assert socket.order.timers == {}


async def test_without_queued_held_states_go_when_the_wait_ends_and_a_late_queued_is_dropped():
    socket = Socket(hold=0.05)
    await socket.order.arrived(status("b", "in_progress"), created_ms=NEW)
    await socket.order.arrived(status("b", "ringing"), created_ms=NEW)
    async with asyncio.timeout(5):
        while not socket.frames:
            await asyncio.sleep(0.01)
    assert socket.frames == [("b", "ringing"), ("b", "in_progress")]
    # later than the wait: a state already passed
    await socket.order.arrived(status("b", "queued"), created_ms=NEW)
    await socket.order.arrived(status("b", "completed"), created_ms=NEW)
    assert socket.frames == [("b", "ringing"), ("b", "in_progress"), ("b", "completed")]


async def test_the_senders_own_queued_means_no_wait_and_other_calls_are_not_held_up():
    socket = Socket()
    socket.order.sent(status("c", "queued"))  # the ack's socket sent it in place
    await socket.order.arrived(status("c", "dialing"), created_ms=NEW)
    await socket.order.arrived(status("d", "queued"), created_ms=NEW)
    await socket.order.arrived(status("e", "dialing"), created_ms=NEW)  # held, alone
    await socket.order.arrived(status("d", "dialing"), created_ms=NEW)
    assert socket.frames == [("c", "dialing"), ("d", "queued"), ("d", "dialing")]
    socket.order.close()  # the socket closes: nothing held is sent after it
    assert socket.order.timers == {} and socket.order.held == {}


async def test_a_call_created_before_the_socket_opened_waits_for_nothing():
    # Its queued was pushed before the socket joined the group: it will never come.
    socket = Socket()
    await socket.order.arrived(status("f", "ringing"), created_ms=OLD)
    await socket.order.arrived(status("f", "canceled"), created_ms=OLD)
    assert socket.frames == [("f", "ringing"), ("f", "canceled")]
    await socket.order.arrived(status("g", "dialing"))  # no creation time said: no wait either
    assert socket.frames[-1] == ("g", "dialing")


async def test_a_socket_relay_closes_sends_what_it_held_first():
    socket = Socket()
    await socket.order.arrived(status("h", "dialing"), created_ms=NEW)
    await socket.order.arrived(status("h", "canceled"), created_ms=NEW)
    assert socket.frames == []
    await socket.order.flush()
    assert socket.frames == [("h", "dialing"), ("h", "canceled")]
    assert socket.order.held == {} and socket.order.timers == {}
