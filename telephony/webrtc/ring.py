"""Ringing the owner's browsers (issue 43): a call forwarded to the target "browser" rings
every console tab of the owner whose phone is on, and the first tab to answer takes it.

The agent and the tabs' sockets (realtime.consumers) speak through the channel layer, the
same layer that carries every event to sockets:
- the ring asks the owner's phone group (core.events.phone_group) with `rtc.probe`, naming
  a channel of its own; each socket in it sends its tab `incoming_call` with
  `ringBrowser: true` and says `rtc.ringing` back. No answer within PROBE_SECONDS: no tab
  rings, and the target is over at once (voicemail answers, unless a phone takes the call);
- a tab's `rtc_offer` arrives as `rtc.offer`, from the socket that was rung (the socket
  checks that: another user's frames never reach here). The first offer is answered
  (`rtc_answer` to that tab alone); the call is the tab's once its connection is up (ICE and
  DTLS with the fingerprint it signalled). Later offers, and every other tab, get
  `rtc_hangup` with the reason `answered_elsewhere`;
- `rtc.consult`, `rtc.consult_complete` and `rtc.consult_cancel` (issue 58: an attended
  transfer, checked by the socket) from the answering tab go to `on_consult`, which the
  bridge sets while it may consult (telephony.dial); a consultation asked for when it may
  not is told `call_consult` `returned` (`failed`) at once;
- `rtc.candidate` adds the answering tab's trickled candidates; `rtc.hangup` is a tab that
  declined, switched its phone off or closed: the ring is over when no tab is left, and the
  talk when the answering tab leaves;
- at close every tab the ring knows is told `rtc_hangup` with its reason, and the phone group
  is told the same for the tabs whose `rtc.ringing` (or offer) crossed the close: a socket
  still in the ring passes it on, so a tab always learns its ring is over.
Nothing here touches the database: telephony.dial records the leg as it records a phone's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from channels.layers import get_channel_layer

from core import events
from core.webrtc import BROWSER, OfferRefused
from telephony.sip.race import race
from telephony.webrtc.leg import BrowserLeg

logger = logging.getLogger(__name__)

PROBE_SECONDS = 1.0  # for the first tab to say it rings
CONNECT_SECONDS = 15.0  # from the answer until the tab's connection is up


class BrowserRing:
    """One ring of the owner's tabs for one call, and then its talk. `frame` is the
    `incoming_call` frame the tabs are sent: its `ring` names the ring in every frame, both
    ways, and its `call` (the call's ledger id) is on every frame Relay sends about it, with
    `callId` repeating the ring (deprecated, for one release).
    Like a SIP leg to dial.Dial: `target`, `stream` (once answered) and `hang_up()`."""

    target = BROWSER

    def __init__(
        self, *, owner_id, frame: dict, ice_servers: list[dict], ports: range | None, label: str
    ) -> None:
        self.owner_id, self.frame, self.label = owner_id, frame, label
        self.ring_id, self.call = frame["ring"], frame["call"]
        self.ice_servers, self.ports = ice_servers, ports
        self.layer = get_channel_layer()
        self.channel = ""
        self.tabs: set[str] = set()  # the sockets ringing (or talking)
        self.answering = ""  # the socket whose offer was answered
        self.leg: BrowserLeg | None = None
        self.answered_at = 0.0
        self.over = asyncio.Event()  # hang_up(), or no tab left
        self.changed = asyncio.Event()  # a tab came or went
        self.receiver: asyncio.Task | None = None
        self.law: int | None = None  # the caller's, from ring()
        self.removed = False  # remove(): the person is no member of the number any more
        # The bridge's taker of the answering tab's consultation frames (kind, message), while
        # it may consult (telephony.dial); None: no consultation now.
        self.on_consult: Callable[[str, dict], None] | None = None

    @property
    def stream(self):
        return self.leg.stream

    def hang_up(self, *, reason: str = "") -> None:
        # `reason` is a SIP leg's (RFC 3326); the tabs are told theirs by close().
        self.over.set()

    def remove(self) -> None:
        """The person left the number (or was removed) as it rang them: their tabs stop, told
        `removed`, and they cannot win."""
        self.removed = True
        self.over.set()

    async def ring(self, seconds: float, *, law: int | None = None) -> bool:
        """Ring the tabs for up to `seconds`. True once a tab's connection is up (the call is
        that tab's); False when no tab rang, every one left, time ran out or hang_up().
        `law` is the caller's G.711 payload type: a tab that offers it is answered in it."""
        if self.layer is None:
            return False
        self.law = law
        loop = asyncio.get_running_loop()
        self.channel = await self.layer.new_channel()
        self.receiver = asyncio.create_task(self._receive())
        probe = {"type": "rtc.probe", "reply": self.channel, "event": self.frame}
        await self.layer.group_send(events.phone_group(self.owner_id), probe)
        probe_until, until = loop.time() + PROBE_SECONDS, loop.time() + seconds
        while True:
            self.changed.clear()  # before the checks: a message handled later wakes the wait
            if self.over.is_set():
                break
            if self.leg is not None and self.leg.connected.is_set():
                return True
            if self.leg is not None:  # answered: its connection has its own while
                deadline = self.answered_at + CONNECT_SECONDS
            else:
                deadline = until if self.tabs else min(probe_until, until)
            if loop.time() >= deadline:
                break
            waited = [self.changed, self.over]
            if self.leg is not None:
                waited.append(self.leg.connected)
            await race(*(event.wait() for event in waited), timeout=deadline - loop.time())
        return False

    async def talking(self) -> None:
        """Returns once the answering tab is gone: its hang-up, its connection ended, or
        hang_up()."""
        waited = [self.over] if self.leg is None else [self.over, self.leg.ended]
        await race(*(event.wait() for event in waited))

    async def close(self, reason: str) -> None:
        """End the ring and the talk: every tab still in it is sent `rtc_hangup` with
        `reason` (the answering tab `ended` once it talked)."""
        self.over.set()
        if self.receiver is not None:
            self.receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.receiver
        talked = self.leg is not None and self.leg.connected.is_set()
        for tab in list(self.tabs):
            why = "ended" if talked and tab == self.answering else reason
            await self._tell(tab, self._frame("rtc_hangup", reason=why))
        self.tabs.clear()
        if self.channel:
            # A socket whose `rtc.ringing` had not reached the receiver (a phone answered, or
            # the caller hung up, first; or it said so after PROBE_SECONDS) rings a tab that
            # no one above told: the owner's phone group is told too, after the probe (so
            # each socket reads it after the probe), and a socket still in the ring passes it
            # to its tab; one told already, or never rung, lets it go (realtime.phone).
            told = {"type": "rtc.event", "event": self._frame("rtc_hangup", reason=reason)}
            with contextlib.suppress(Exception):  # the layer down: the sockets' rings are lost
                await self.layer.group_send(
                    events.phone_group(self.owner_id), {**told, "ringing_only": True}
                )
        if self.leg is not None:
            await self.leg.close()

    def _frame(self, kind: str, **fields) -> dict:
        """A frame about this ring, for a tab: `ring`, `call`, and the deprecated `callId`."""
        ring = self.ring_id
        return {"type": kind, "ring": ring, "call": self.call, "callId": ring, **fields}

    async def tell(self, kind: str, **fields) -> None:
        """A frame about this ring to the tab that took it (nothing before one did)."""
        if self.answering:
            await self._tell(self.answering, self._frame(kind, **fields))

    async def _tell(self, tab: str, frame: dict) -> None:
        with contextlib.suppress(Exception):  # a socket gone, the layer down: the tab is over
            await self.layer.send(tab, {"type": "rtc.event", "event": frame})

    async def _receive(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the layer lost: the tabs are lost with it
                logger.warning("%s: the channel layer failed; the browsers' ring ends", self.label)
                self.over.set()
                return
            try:
                await self._handle(message["type"], message["tab"], message)
            except (KeyError, TypeError):
                continue  # not a message of a socket's: passed over
            except Exception:  # noqa: BLE001 - one tab's trouble must not stop the others'
                logger.exception("%s: a browser's message failed", self.label)

    async def _handle(self, kind: str, tab: str, message: dict) -> None:
        if kind == "rtc.ringing":
            self.tabs.add(tab)
        elif kind == "rtc.offer":
            await self._offer(tab, message["sdp"])
        elif kind in ("rtc.candidate", "rtc.dtmf", "rtc.hold"):
            if tab == self.answering and self.leg is not None:
                await signal_taken(self.leg, message)
        elif kind in ("rtc.consult", "rtc.consult_complete", "rtc.consult_cancel"):
            if tab != self.answering:
                return  # a tab that did not take the call: the socket allows none
            if self.on_consult is not None:
                self.on_consult(kind, message)
            elif kind == "rtc.consult":
                await self.tell("call_consult", status="returned", reason="failed")
        elif kind == "rtc.hangup":
            self.tabs.discard(tab)
            if tab == self.answering or not self.tabs:
                self.over.set()
        self.changed.set()

    async def _offer(self, tab: str, sdp: str) -> None:
        if tab not in self.tabs:
            return  # not rung, or left already
        if self.leg is not None:  # another tab answered first
            self.tabs.discard(tab)
            await self._tell(tab, self._frame("rtc_hangup", reason="answered_elsewhere"))
            return
        names = {"ring": self.ring_id, "call": self.call, "callId": self.ring_id}
        leg = BrowserLeg(
            ice_servers=self.ice_servers, ports=self.ports, label=self.label, names=names
        )
        try:
            answer = await leg.answer(sdp, law=self.law)
        except OfferRefused as refused:
            await leg.close()
            self.tabs.discard(tab)
            await self._tell(tab, self._frame("rtc_hangup", reason=str(refused)))
            if not self.tabs:
                self.over.set()
            return
        self.leg, self.answering = leg, tab
        self.answered_at = asyncio.get_running_loop().time()
        await self._tell(tab, self._frame("rtc_answer", sdp=answer))
        for other in self.tabs - {tab}:
            self.tabs.discard(other)
            await self._tell(other, self._frame("rtc_hangup", reason="answered_elsewhere"))


async def signals_taken(layer, channel: str, leg: BrowserLeg) -> None:
    """For a call placed from the browser: the tab's trickled candidates and keypad keys
    (`rtc.candidate`, `rtc.dtmf` on `channel`, named to its socket as the `rtc_answer`'s
    peer), taken by `leg` until cancelled."""
    while True:
        try:
            message = await layer.receive(channel)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the layer lost: the call goes on without
            logger.warning("%s: the channel layer failed; no more signals from the tab", leg.label)
            return
        await signal_taken(leg, message)


async def signal_taken(leg: BrowserLeg, message: dict) -> None:
    """A candidate (added), keys (pressed, in the background: they take their time) or a
    hold (the tab's stream held or resumed, and the tab told so with `rtc_hold`)."""
    kind = message.get("type")
    if kind == "rtc.candidate" and isinstance(message.get("candidate"), str):
        await leg.add_candidate(message["candidate"], message.get("sdpMid"))
    elif kind == "rtc.hold" and isinstance(message.get("hold"), bool):
        await leg.held_by_tab(message["hold"], message.get("tab"))
    elif kind == "rtc.dtmf" and isinstance(message.get("digits"), str):
        pressing = asyncio.ensure_future(leg.stream.press(message["digits"]))
        leg.tasks.append(pressing)
        pressing.add_done_callback(leg.tasks.remove)
