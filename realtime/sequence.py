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


class CallFrames:
    """One socket's `call_status` frames: each call's in the order of their numbers
    (SentSeqs), and the frames of a call this socket submitted held while its answer is owed.

    The socket that sent a call frame sends the call's `queued` itself, in place, right after
    the ack; the ack waits for the answers to the socket's earlier frames. Meanwhile the agent
    may have claimed the call and pushed `dialing` through the group: sent at once, it would
    pass the `queued` and drop it. So the group's frames of a callId this socket has a frame
    of still unanswered (`owe`) wait until that answer is sent (`answered`), and then go in
    their turn. The wait is this socket's own answer, never a clock or a timer."""

    def __init__(self, remembered: int = REMEMBERED_CALLS):
        self.seqs = SentSeqs(remembered)
        self.owed: dict[str, int] = {}  # callId -> its call frames not yet answered
        self.held: dict[str, list[dict]] = {}  # callId -> frames from the group meanwhile

    def owe(self, call_id) -> None:
        """A call frame of `call_id` was read; its answer is to come."""
        if isinstance(call_id, str):
            self.owed[call_id] = self.owed.get(call_id, 0) + 1

    def arrived(self, frame: dict) -> list[dict]:
        """A frame from the group: what to send now (it, or nothing: held or passed)."""
        call_id = frame.get("callId")
        if call_id in self.owed:
            self.held.setdefault(call_id, []).append(frame)
            return []
        return [frame] if self.seqs.take(frame) else []

    def in_place(self, frame: dict) -> list[dict]:
        """A frame this socket sends with its answer (the sender's own `queued`)."""
        return [frame] if self.seqs.take(frame) else []

    def answered(self, call_id) -> list[dict]:
        """The answer to a call frame of `call_id` is sent (or never will be): the frames
        held for it, to send now, in order."""
        if not isinstance(call_id, str) or call_id not in self.owed:
            return []
        self.owed[call_id] -= 1
        if not self.owed[call_id]:
            del self.owed[call_id]
        return [frame for frame in self.held.pop(call_id, []) if self.seqs.take(frame)]
