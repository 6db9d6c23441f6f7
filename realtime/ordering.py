"""Each call's `call_status` frames in order on one socket, whatever order they reach it in.

A call's `queued` is pushed by the process that took the call frame, once its batch is
committed, to the user's group; every later state is pushed by the agent that claimed the
call. The agent may claim it within milliseconds of the commit, while the web process is still
pushing the rest of its batch: the user's other sockets then got `dialing` before `queued`
(docs/websocket.md promises each call's frames in order). Every later state comes from the
one agent holding the call, in order.

So a socket holds a later state of a call it has not seen yet, for at most HOLD_SECONDS,
waiting for that call's `queued`, when that `queued` is bound to reach it: the call was
created after the socket opened (its group was joined by then). When `queued` comes, both go
in order; when it does not (its push failed), the held frames go at the end of the wait. A
socket opened after the call was created sends its frames as they come: it waits for nothing
it may never get. A frame of a state the socket has already passed is dropped, never sent out
of order. The socket that sent the call frame has its `queued` in place with its ack
(`sent`), and never waits. A socket Relay closes (a logout) sends what it holds first
(`flush`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from realtime.models import CallState

HOLD_SECONDS = 1.0
REMEMBERED_CALLS = 4096  # the last calls a socket has seen, for their order
_RANKS = {
    CallState.QUEUED: 0,
    CallState.DIALING: 1,
    CallState.RINGING: 2,
    CallState.IN_PROGRESS: 3,
}
TERMINAL_RANK = 4


def rank(status: str) -> int:
    return _RANKS.get(status, TERMINAL_RANK)


class StatusOrder:
    """One socket's order of call states; `send` sends a frame on it."""

    def __init__(
        self, send: Callable[[dict], Awaitable[None]], *, opened_ms: int, hold=HOLD_SECONDS
    ):
        self.send = send
        self.opened_ms = opened_ms  # when the socket had joined its groups
        self.hold = hold
        self.ranks: OrderedDict[str, int] = OrderedDict()  # callId -> the last state sent
        self.held: dict[str, list[dict]] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.flushes: set[asyncio.Task] = set()
        self.lock = asyncio.Lock()  # a timer's flush and a new frame never interleave

    def sent(self, event: dict) -> None:
        """`event` was sent in place (the sender's own `queued`)."""
        self._remember(event["callId"], rank(event["status"]))

    async def arrived(self, event: dict, *, created_ms: int | None = None) -> None:
        """A call_status frame from the group (of a call created at `created_ms`): sent now,
        held, or dropped as passed."""
        call_id, step = event["callId"], rank(event["status"])
        async with self.lock:
            if call_id in self.held:
                self.held[call_id].append(event)
                if step == 0:
                    await self._flush(call_id)
                return
            last = self.ranks.get(call_id)
            created_after = created_ms is not None and created_ms >= self.opened_ms
            if last is None and step > 0 and created_after:
                self.held[call_id] = [event]
                loop = asyncio.get_running_loop()
                self.timers[call_id] = loop.call_later(self.hold, self._flush_later, call_id)
                return
            if last is not None and step < last:
                return  # a state this socket has passed
            self._remember(call_id, step)
            await self.send(event)

    async def flush(self) -> None:
        """Send every held frame now (the socket is about to be closed)."""
        async with self.lock:
            for call_id in list(self.held):
                await self._flush(call_id)

    def close(self) -> None:
        for timer in self.timers.values():
            timer.cancel()
        for task in self.flushes:
            task.cancel()
        self.timers.clear()
        self.held.clear()

    def _flush_later(self, call_id: str) -> None:
        task = asyncio.ensure_future(self._flush_locked(call_id))
        self.flushes.add(task)
        task.add_done_callback(self.flushes.discard)

    async def _flush_locked(self, call_id: str) -> None:
        async with self.lock:
            await self._flush(call_id)

    async def _flush(self, call_id: str) -> None:
        """The held frames of `call_id`, in the order of their states (lock held)."""
        with contextlib.suppress(KeyError):
            self.timers.pop(call_id).cancel()
        events = sorted(self.held.pop(call_id, []), key=lambda e: rank(e["status"]))
        for event in events:
            step, last = rank(event["status"]), self.ranks.get(call_id)
            if last is not None and step < last:
                continue
            self._remember(call_id, step)
            await self.send(event)

    def _remember(self, call_id: str, step: int) -> None:
        self.ranks[call_id] = step
        self.ranks.move_to_end(call_id)
        while len(self.ranks) > REMEMBERED_CALLS:
            self.ranks.popitem(last=False)
