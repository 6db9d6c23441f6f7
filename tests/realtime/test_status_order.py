"""One socket's order of a call's states (realtime.ordering): whatever order the frames reach
the socket in, they leave it in the order of the call's states, and none waits for long."""

from __future__ import annotations

import asyncio

import pytest

from realtime.ordering import StatusOrder

pytestmark = pytest.mark.timeout(30)


def status(call_id: str, state: str) -> dict:
    return {"type": "call_status", "callId": call_id, "status": state, "ts": 1}


class Socket:
    def __init__(self, hold: float = 5.0):
        self.frames: list[tuple[str, str]] = []
        self.order = StatusOrder(self.send, hold=hold)

    async def send(self, event: dict) -> None:
        self.frames.append((event["callId"], event["status"]))


async def test_a_later_state_that_comes_first_waits_for_queued_then_both_go_in_order():
    socket = Socket()
    await socket.order.arrived(status("a", "dialing"))
    await socket.order.arrived(status("a", "ringing"))
    assert socket.frames == []  # held: queued may be on its way
    await socket.order.arrived(status("a", "queued"))
    assert socket.frames == [("a", "queued"), ("a", "dialing"), ("a", "ringing")]
    await socket.order.arrived(status("a", "completed"))
    assert socket.frames[-1] == ("a", "completed")
    assert socket.order.timers == {}


async def test_without_queued_held_states_go_when_the_wait_ends_and_a_late_queued_is_dropped():
    socket = Socket(hold=0.05)
    await socket.order.arrived(status("b", "in_progress"))
    await socket.order.arrived(status("b", "ringing"))
    async with asyncio.timeout(5):
        while not socket.frames:
            await asyncio.sleep(0.01)
    assert socket.frames == [("b", "ringing"), ("b", "in_progress")]
    await socket.order.arrived(status("b", "queued"))  # later than the wait: already passed
    await socket.order.arrived(status("b", "completed"))
    assert socket.frames == [("b", "ringing"), ("b", "in_progress"), ("b", "completed")]


async def test_the_senders_own_queued_means_no_wait_and_other_calls_are_not_held_up():
    socket = Socket()
    socket.order.sent(status("c", "queued"))  # the ack's socket sent it in place
    await socket.order.arrived(status("c", "dialing"))
    await socket.order.arrived(status("d", "queued"))
    await socket.order.arrived(status("e", "dialing"))  # held, alone
    await socket.order.arrived(status("d", "dialing"))
    assert socket.frames == [("c", "dialing"), ("d", "queued"), ("d", "dialing")]
    socket.order.close()  # the socket closes: nothing held is sent after it
    assert socket.order.timers == {} and socket.order.held == {}
