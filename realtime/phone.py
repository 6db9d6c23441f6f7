"""A socket's browser phone (issue 43): the frames between a console tab and the telephony
agent that rings it, carried through the channel layer (telephony.webrtc.ring has the
agent's side; docs/websocket.md the frames).

- `{"type": "phone", "on": true|false}` puts the socket in the owner's phone group
  (core.events.phone_group) or takes it out; answered `{"type": "phone", "on": ...}`.
- A ring reaches a socket whose phone is on as `rtc.probe`: the socket sends its tab the
  ring's `incoming_call` (`ringBrowser: true`) and tells the agent it rings. From then on
  the ring (`ring`, `ring-...`) is this socket's to answer (`rtc_offer` without `to`), to
  trickle candidates to (`rtc_candidate`), to send keys to (`rtc_dtmf`), to hold and
  resume (`rtc_hold`) and to leave
  (`rtc_hangup`). A ring this socket was never sent is answered `not_found`: another
  user's ring never is. Issue 54's "one name per meaning": `callId` is a client's id of a
  call it placed, so a ring is named `ring`; a tab's frame may still name it by `callId`
  (deprecated for one release), and one naming both must name the same ring.
- `rtc_candidate`, `rtc_dtmf` (the keypad's keys) and `rtc_hold` for a call this socket
  placed from the browser go to the agent that answered its offer (the `peer` its
  `rtc_answer` came with).
- A ring this socket took may be consulted on, then completed or cancelled (an attended
  transfer, issue 58: CONSULT_FRAMES, checked by the consumer and realtime.services): each
  goes to the ring's agent, which takes it only from the tab that talks.
- Switching the phone off, or the socket closing, leaves every ring it was in.
- A ring's end reaches the socket as `rtc_hangup`, from its agent to this socket, or to the
  owner's phone group (`ringing_only`) for a socket whose `rtc.ringing` crossed the ring's
  close: passed on only while this socket is in that ring, so a tab learns it once.
"""

from __future__ import annotations

import contextlib
import re

from redis.exceptions import RedisError

from core import events, parsing
from core.errors import InvalidRequest, NotFound
from core.webrtc import candidate_problem, offer_problem

RING_PREFIX = "ring-"
# A tab's frames of an attended transfer (issue 58), and what each is to its ring's agent.
CONSULT_FRAMES = {
    "call_consult": "rtc.consult",
    "call_consult_complete": "rtc.consult_complete",
    "call_consult_cancel": "rtc.consult_cancel",
}
RING_MAX = 64  # what a tab may send as `ring`; Relay's own are "ring-" and 16 hex digits
MAX_DIGITS = 32
DIGITS = re.compile(rf"[0-9*#A-D]{{1,{MAX_DIGITS}}}")


def rings_answer(frame: dict) -> bool:
    """An `rtc_offer` about a ring (`ring`, or no `to` and a ring's deprecated callId), not a
    call placed. One with both `ring` and `to` is refused by Phone.answer."""
    call_id = frame.get("callId")
    deprecated = isinstance(call_id, str) and call_id.startswith(RING_PREFIX)
    return "ring" in frame or ("to" not in frame and deprecated)


def ring_problem(ring) -> str | None:
    """Why a tab's `ring` can name no ring, or None."""
    if not isinstance(ring, str) or not 1 <= len(ring) <= RING_MAX:
        return f"A string of 1 to {RING_MAX} characters."
    return parsing.id_problem(ring)


def ring_of(frame: dict) -> str:
    """The frame's `ring`, checked; a deprecated `callId` beside it must be the same."""
    ring = frame["ring"]
    problem = ring_problem(ring)
    if problem is not None:
        raise InvalidRequest(f"ring: {problem}", fields={"ring": [problem]})
    if "callId" in frame and frame["callId"] != ring:
        raise InvalidRequest(
            "ring and callId differ: send ring alone (callId is deprecated on a ring's frames).",
            fields={"ring": ["Not the same as callId."], "callId": ["Not the same as ring."]},
        )
    return ring


def ring_echo(frame) -> dict:
    """{"ring": ...} for an error frame, when the frame carried an acceptable one."""
    ring = frame.get("ring") if isinstance(frame, dict) else None
    return {"ring": ring} if ring_problem(ring) is None else {}


def _call_id(frame: dict) -> str:
    call_id = frame.get("callId")
    if not isinstance(call_id, str) or parsing.text_problem(call_id) is not None:
        raise InvalidRequest("callId must be a string.", fields={"callId": ["A string."]})
    return call_id


class Phone:
    """One socket's phone: on or off, the rings it is in (ring -> the agent's channel),
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
        if "ring" in frame:
            if "to" in frame:
                why = "An rtc_offer with to places a call; one with ring (and no to) answers."
                raise InvalidRequest(f"ring: {why}", fields={"ring": [why]})
            agent = self._ringing(ring_of(frame))
        else:  # deprecated: the ring named by callId
            agent = self.rings.get(_call_id(frame))
            if agent is None:
                raise NotFound("No call rings this tab with this callId (it may have ended).")
        problem = offer_problem(frame.get("sdp"))
        if problem is not None:
            raise InvalidRequest(f"sdp: {problem}.", fields={"sdp": [problem]})
        await self._to(agent, {"type": "rtc.offer", "sdp": frame["sdp"]})

    def _ringing(self, ring: str) -> str:
        """The agent's channel of a ring this socket is in; NotFound for any other."""
        agent = self.rings.get(ring)
        if agent is None:
            raise _no_ring()
        return agent

    def _agent_of(self, frame: dict) -> str:
        """The agent's channel of the frame's `ring` (a ring this socket is in) or callId (a
        call this tab placed, or a ring: deprecated); NotFound for anything else (another
        user's ring or callId included)."""
        if "ring" in frame:
            return self._ringing(ring_of(frame))
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

    async def hold(self, frame: dict) -> None:
        """`rtc_hold`: the tab holds its call (`hold: true`) or resumes it (`false`); the
        agent holds the tab's stream and answers `rtc_hold` itself, once in force."""
        agent = self._agent_of(frame)
        hold = frame.get("hold")
        if not isinstance(hold, bool):
            raise InvalidRequest("hold must be true or false.", fields={"hold": ["true or false."]})
        await self._to(agent, {"type": "rtc.hold", "hold": hold})

    def ring_agent(self, frame: dict) -> str:
        """The agent's channel of the frame's `ring`, which it must name (invalid_request
        naming it) and which must be this socket's (else NotFound): a consultation's frames
        (CONSULT_FRAMES) are a ring's alone."""
        if "ring" not in frame:
            why = "The ring this tab took, which the frame is about."
            raise InvalidRequest(f"ring: {why}", fields={"ring": [why]})
        return self._ringing(ring_of(frame))

    async def consult(self, agent: str, message: dict) -> None:
        """A consultation's step (rtc.consult with its `to`, rtc.consult_complete or
        rtc.consult_cancel), checked by the socket already, to the ring's agent."""
        await self._to(agent, message)

    async def hang_up(self, frame: dict) -> None:
        """`rtc_hangup` naming a `ring`: that ring is left; NotFound for no ring of this
        socket's (never a call placed: those are named by callId)."""
        if not await self.hang_up_ring(ring_of(frame)):
            raise _no_ring()

    async def hang_up_ring(self, ring: str) -> bool:
        """`rtc_hangup` of a ring this socket is in (declined, or the talk ended from the
        page): the agent is told. False when `ring` is no ring of this socket's."""
        agent = self.rings.pop(ring, None)
        if agent is None:
            return False
        await self._to(agent, {"type": "rtc.hangup"})
        return True

    async def leave_rings(self) -> None:
        for ring in list(self.rings):
            with contextlib.suppress(RedisError, OSError):
                await self.hang_up_ring(ring)

    async def probed(self, message: dict) -> dict | None:
        """An agent's `rtc.probe`: the frame the tab is sent (None: the phone is off)."""
        if not self.on:
            return None
        frame = _named(message["event"])
        self.rings[frame["ring"]] = message["reply"]
        await self._to(message["reply"], {"type": "rtc.ringing"})
        return frame

    def agent_said(self, message: dict) -> dict | None:
        """A frame an agent sent this socket (`rtc.event`), as the tab gets it: a ring it
        ended is no longer this socket's. None: a ring's end told to the owner's phone group
        (`ringing_only`, telephony.webrtc.ring's close) that is not for this socket: it was
        told already, left the ring, or was never rung."""
        frame = _named(message["event"])
        if frame.get("type") == "rtc_hangup":
            ringing = self.rings.pop(frame.get("ring"), None) is not None
            if message.get("ringing_only") and not ringing:
                return None
        return frame

    def answered(self, message: dict) -> None:
        """An `rtc_answer` pushed to the user's sockets: the one that offered keeps its
        agent's channel, for its candidates."""
        frame = message["event"]
        if frame.get("callId") in self.offered and message.get("peer"):
            self.peers[frame["callId"]] = message["peer"]

    async def _to(self, agent: str, message: dict) -> None:
        await self.layer.send(agent, {**message, "tab": self.channel})


# The phone's frames a tab sends, and the method of Phone that takes each (an `rtc_offer` here
# answers a ring: rings_answer; one that places a call is the consumer's).
PHONE_FRAMES = {
    "rtc_offer": Phone.answer,
    "rtc_candidate": Phone.candidate,
    "rtc_dtmf": Phone.dtmf,
    "rtc_hold": Phone.hold,
    "phone": Phone.switch,
}


def _no_ring() -> NotFound:
    why = "No call rings this tab with this ring (it may have ended)."
    return NotFound(why, fields={"ring": [why]})


def _named(frame: dict) -> dict:
    """An agent's frame about a ring with its `ring`: an agent of the release before names
    it by callId alone."""
    call_id = frame.get("callId")
    if "ring" in frame or not (isinstance(call_id, str) and call_id.startswith(RING_PREFIX)):
        return frame
    return {**frame, "ring": call_id}
