"""A socket's browser phone (issue 43): the frames between a console tab and the telephony
agent that rings it, carried through the channel layer (telephony.webrtc.ring has the
agent's side; docs/websocket.md the frames).

- `{"type": "phone", "on": true|false}` puts the socket in the owner's phone group
  (core.events.phone_group) or takes it out; answered `{"type": "phone", "on": ...}`.
- A ring reaches a socket whose phone is on as `rtc.probe`: the socket sends its tab the
  ring's `incoming_call` (`ringBrowser: true`) and tells the agent it rings. From then on
  the ring's `callId` (`ring-...`) is this socket's to answer (`rtc_offer` without `to`),
  to trickle candidates to (`rtc_candidate`) and to leave (`rtc_hangup`). A ring this
  socket was never sent is answered `not_found`: another user's ring never is.
- `rtc_candidate` and `rtc_dtmf` (the keypad's keys) for a call this socket placed from the
  browser go to the agent that answered its offer (the `peer` its `rtc_answer` came with).
- Switching the phone off, or the socket closing, leaves every ring it was in.
"""

from __future__ import annotations

import contextlib
import re

from redis.exceptions import RedisError

from core import events, parsing
from core.errors import InvalidRequest, NotFound
from core.webrtc import candidate_problem, offer_problem

RING_PREFIX = "ring-"
MAX_DIGITS = 32
DIGITS = re.compile(rf"[0-9*#A-D]{{1,{MAX_DIGITS}}}")


def rings_answer(frame: dict) -> bool:
    """An `rtc_offer` that answers a ring (no `to`, a ring's callId), not a call placed."""
    call_id = frame.get("callId")
    return "to" not in frame and isinstance(call_id, str) and call_id.startswith(RING_PREFIX)


def _call_id(frame: dict) -> str:
    call_id = frame.get("callId")
    if not isinstance(call_id, str) or parsing.text_problem(call_id) is not None:
        raise InvalidRequest("callId must be a string.", fields={"callId": ["A string."]})
    return call_id


class Phone:
    """One socket's phone: on or off, the rings it is in (callId -> the agent's channel),
    and the agents of the calls it placed from the browser (callId -> channel)."""

    def __init__(self, *, layer, channel: str, user_id) -> None:
        self.layer, self.channel, self.user_id = layer, channel, user_id
        self.on = False
        self.rings: dict[str, str] = {}
        self.offered: set[str] = set()  # callIds of the calls this socket placed by rtc_offer
        self.peers: dict[str, str] = {}

    async def switch(self, frame: dict) -> dict:
        """The `phone` frame: on or off; its answer."""
        on = frame.get("on")
        if not isinstance(on, bool):
            raise InvalidRequest("on must be true or false.", fields={"on": ["true or false."]})
        group = events.phone_group(self.user_id)
        if on and not self.on:
            await self.layer.group_add(group, self.channel)
        elif not on and self.on:
            await self.layer.group_discard(group, self.channel)
            await self.leave_rings()
        self.on = on
        return {"type": "phone", "on": on}

    async def answer(self, frame: dict) -> None:
        """An `rtc_offer` answering a ring: on to the agent that rings this socket."""
        call_id = _call_id(frame)
        agent = self.rings.get(call_id)
        if agent is None:
            raise NotFound("No call rings this tab with this callId (it may have ended).")
        problem = offer_problem(frame.get("sdp"))
        if problem is not None:
            raise InvalidRequest(f"sdp: {problem}.", fields={"sdp": [problem]})
        await self._to(agent, {"type": "rtc.offer", "sdp": frame["sdp"]})

    def _agent_of(self, frame: dict) -> str:
        """The agent's channel of the frame's callId: a ring this socket is in, or a call
        this tab placed; NotFound for anything else (another user's callId included)."""
        call_id = _call_id(frame)
        agent = self.rings.get(call_id) or self.peers.get(call_id)
        if agent is None:
            raise NotFound("No call of this tab's has this callId (it may have ended).")
        return agent

    async def candidate(self, frame: dict) -> None:
        """`rtc_candidate`: a candidate the tab found after its offer, to the agent."""
        agent = self._agent_of(frame)
        candidate, mid = frame.get("candidate"), frame.get("sdpMid")
        problem = candidate_problem(candidate, mid)
        if problem is not None:
            raise InvalidRequest(f"{problem}.", fields={"candidate": [problem]})
        await self._to(agent, {"type": "rtc.candidate", "candidate": candidate, "sdpMid": mid})

    async def dtmf(self, frame: dict) -> None:
        """`rtc_dtmf`: keys of the page's keypad, sent on to the phone as RFC 4733 events.
        The digits never reach a log."""
        agent = self._agent_of(frame)
        digits = frame.get("digits")
        if not isinstance(digits, str) or not DIGITS.fullmatch(digits):
            problem = f"1 to {MAX_DIGITS} of 0-9, *, # and A-D."
            raise InvalidRequest(f"digits: {problem}", fields={"digits": [problem]})
        await self._to(agent, {"type": "rtc.dtmf", "digits": digits})

    async def hang_up_ring(self, call_id: str) -> bool:
        """`rtc_hangup` of a ring this socket is in (declined, or the talk ended from the
        page): the agent is told. False when the callId is no ring of this socket's."""
        agent = self.rings.pop(call_id, None)
        if agent is None:
            return False
        await self._to(agent, {"type": "rtc.hangup"})
        return True

    async def leave_rings(self) -> None:
        for call_id in list(self.rings):
            with contextlib.suppress(RedisError, OSError):
                await self.hang_up_ring(call_id)

    async def probed(self, message: dict) -> dict | None:
        """An agent's `rtc.probe`: the frame the tab is sent (None: the phone is off)."""
        if not self.on:
            return None
        frame = message["event"]
        self.rings[frame["callId"]] = message["reply"]
        await self._to(message["reply"], {"type": "rtc.ringing"})
        return frame

    def agent_said(self, frame: dict) -> None:
        """A frame an agent sent this socket: a ring it ended is no longer this socket's."""
        if frame.get("type") == "rtc_hangup":
            self.rings.pop(frame.get("callId"), None)

    def answered(self, message: dict) -> None:
        """An `rtc_answer` pushed to the user's sockets: the one that offered keeps its
        agent's channel, for its candidates."""
        frame = message["event"]
        if frame.get("callId") in self.offered and message.get("peer"):
            self.peers[frame["callId"]] = message["peer"]

    async def _to(self, agent: str, message: dict) -> None:
        await self.layer.send(agent, {**message, "tab": self.channel})
