"""Each call's `call_status` frames on one socket in the order of their events, by number.

Every event of a call has its `seq` (calls.services numbers them as it writes them), and a
socket sends a call's frame only when its `seq` is above the last one it sent of that call.
A frame that comes later than a newer one of the same call (the agent's `dialing` can reach a
user's other socket before the web process's `queued`) is dropped, never sent out of order,
and counted (relay_call_status_dropped), not logged. The client sees the gap in the numbers
and reads what it missed from `GET /api/calls/:callId` (docs/websocket.md). Nothing is held
and nothing waits: the order is the ledger's, not the clocks'.
"""

from __future__ import annotations

from collections import OrderedDict

from core import metrics

REMEMBERED_CALLS = 4096  # the last calls a socket has sent frames of


class SentSeqs:
    """One socket's last `seq` sent, per call (its `call`), for the last REMEMBERED_CALLS."""

    def __init__(self, remembered: int = REMEMBERED_CALLS):
        self.remembered = remembered
        self.last: OrderedDict[str, int] = OrderedDict()

    def take(self, frame: dict) -> bool:
        """Whether `frame` (a call_status frame) goes out: its `seq` is above the last sent of
        its call. Remembered when it does; counted when it does not."""
        call, seq = frame.get("call"), frame.get("seq")
        if call is None or seq is None:
            return True  # not a frame of the ledger's: nothing to order it by
        last = self.last.get(call)
        if last is not None and seq <= last:
            metrics.call_status_dropped.inc()
            return False
        self.last[call] = seq
        self.last.move_to_end(call)
        while len(self.last) > self.remembered:
            self.last.popitem(last=False)
        return True
