"""The three kinds of outbound call the telephony agent places, each behind one interface
(`OutboundRun`), so that `TelephonyAgent._run_call` drives them all alike (issue 54, "The
agent speaks one language"):
- a message (`MessageRun`): rendered to speech before the INVITE and played once answered;
  a message that cannot be spoken ends the call `failed` before anything is sent;
- a script (`ScriptedRun`): its verbs run once the call is answered (telephony.scripted);
- a call from the browser (`BrowserRun`): the browser's leg answers its offer first (its
  answer sent to the owner's sockets), and is bridged to the call once answered; the tab
  gone, even while it rings, the call hangs up. An offer the leg cannot answer ends the call
  `failed` with the reason. Once answered, the callee may be handed on to someone else
  (a blind transfer, issue 58: telephony.outbound_transfer).

The agent keeps the call's row and moves it (realtime.pipeline); a kind says what the call
carries and how it ends, and writes nothing itself: a script's reports and recordings go
through the callables the agent hands it, in the agent's database thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from channels.layers import get_channel_layer

from calls.models import Call
from calls.states import CallState
from core import events
from core.webrtc import OfferRefused
from realtime.providers import Step
from telephony.detection import LEAVE_MESSAGE, Detected, DetectingTalk
from telephony.dial import Dialing
from telephony.machine_detection import DECIDE_SECONDS, SPEAK_CAP_SECONDS
from telephony.outbound_transfer import BrowserCallTransfer
from telephony.scripted import Report, ScriptedTalk, Store
from telephony.sip.uac import OutboundCall
from telephony.speech import Speech, SpeechError
from telephony.webrtc.leg import BrowserLeg, BrowserTalk, agent_ice_servers
from telephony.webrtc.ring import signals_taken

# What an answered call runs instead of playing audio (OutboundCall's `talk`); it has
# `ended_by`, the sentence of a limit that hung the call up, else "".
Talk = Callable[[OutboundCall], Awaitable[None]]


class OutboundRun:
    """One outbound call of its kind, as the agent drives it: `ready()` first (None, or the
    step the call ends at before anything is sent), then the INVITE, which carries `audio`
    (G.711 by payload type, played once answered) or runs `talk` once answered;
    `placed(sip)` once it is under way; the plan's quota asked for `planned()` seconds of
    talk at the answer (None: up to SIP_MAX_CALL_SECONDS); `ended_by` read at its end; and
    `close()` whatever happened. What a kind does not override, it does not need."""

    talk: Talk | None = None
    ended_by = ""  # no limit of a script ended it

    def __init__(self, record: Call) -> None:
        self.record = record
        self.audio: dict[int, bytes] = {}

    async def ready(self) -> Step | None:
        raise NotImplementedError

    def placed(self, sip: OutboundCall) -> None:
        pass

    def planned(self) -> float | None:
        return None

    async def close(self) -> None:
        pass


class MessageRun(OutboundRun):
    """A call that plays its message once: the talk it plans is the message's length, and a
    second to spare. With machine detection (telephony.detection), its talk listens as it
    speaks, and plans for the wait: the decision's DECIDE_SECONDS at least, and with
    `leave_message` a greeting up to SPEAK_CAP_SECONDS before the message."""

    def __init__(self, record: Call, *, speech: Speech, detected: Detected) -> None:
        super().__init__(record)
        self.speech, self.detected = speech, detected

    async def ready(self) -> Step | None:
        record = self.record
        try:
            self.audio = await asyncio.to_thread(
                self.speech.render, record.message, record.language
            )
        except SpeechError:
            return Step(status=CallState.FAILED, reason="speech synthesis failed")
        if record.machine_detection:
            self.talk = DetectingTalk(
                mode=record.machine_detection,
                detected=self.detected,
                label=f"call {record.pk}",
                audio=self.audio,
            )
        return None

    def planned(self) -> float | None:
        seconds = _seconds_of(self.audio)
        if self.record.machine_detection == LEAVE_MESSAGE:
            return seconds + SPEAK_CAP_SECONDS + 1
        if self.record.machine_detection:
            return max(seconds, DECIDE_SECONDS) + 1
        return seconds + 1

    @property
    def ended_by(self) -> str:
        return self.talk.ended_by if self.talk is not None else ""


class ScriptedRun(OutboundRun):
    """A call that runs its script once answered. Its length is known once it has run (up to
    SIP_MAX_CALL_SECONDS), so it plans none; a limit of the script that hung it up is the
    reason it ends with."""

    def __init__(
        self,
        record: Call,
        *,
        speech: Speech,
        report: Report,
        store: Store,
        dialing: Dialing,
        detected: Detected,
    ) -> None:
        super().__init__(record)
        self.speech, self.report, self.store, self.dialing = speech, report, store, dialing
        self.detected = detected

    async def ready(self) -> Step | None:
        record = self.record
        self.talk = ScriptedTalk.of_call(
            record,
            speech=self.speech,
            report=self.report,
            store=self.store,
            dialing=self.dialing,
        )
        if record.machine_detection:  # the script starts once who answered is known
            self.talk = DetectingTalk(
                mode=record.machine_detection,
                detected=self.detected,
                label=f"call {record.pk}",
                then=self.talk,
                identity=self.talk.program.identity,
            )
        return None

    @property
    def ended_by(self) -> str:
        return self.talk.ended_by


class BrowserRun(OutboundRun):
    """A call from the browser: the browser's leg (telephony.webrtc.leg), bridged to the call
    once answered. `ports` is the agent's share of RTC_PORT_RANGE; `music` the music on hold
    either end hears while the other holds (the number the call is from; None: Relay's)."""

    def __init__(
        self,
        record: Call,
        *,
        ports: range,
        music: Callable[[int], Awaitable[bytes | None]] | None = None,
        transfer: BrowserCallTransfer | None = None,
    ) -> None:
        super().__init__(record)
        self.ports, self.music = ports, music
        self.transfer = transfer  # the callee may be handed on (issue 58); None: never
        self.leg: BrowserLeg | None = None
        self.gone: asyncio.Future | None = None

    async def ready(self) -> Step | None:
        """The browser's leg, its answer sent to the owner's sockets; the call's last step
        when the offer cannot be answered."""
        record = self.record
        leg = BrowserLeg(
            ice_servers=agent_ice_servers(),
            ports=self.ports,
            label=f"call {record.pk}",
            names={"callId": record.call_id},
        )
        try:
            answer = await leg.answer(record.rtc_offer)
        except OfferRefused as refused:
            await leg.close()
            return Step(status=CallState.FAILED, reason=str(refused))
        layer = get_channel_layer()
        if layer is not None:  # the tab's candidates and keys come to a channel of the leg's
            leg.signals = await layer.new_channel()
            leg.tasks.append(asyncio.create_task(signals_taken(layer, leg.signals, leg)))
        frame = {"type": "rtc_answer", "callId": record.call_id, "sdp": answer}
        message = {"type": "relay.event", "event": frame, "peer": leg.signals}
        await events.send_collected([(events.user_group(record.owner_id), message)])
        self.leg = leg
        self.talk = BrowserTalk(leg, music=self.music, transfer=self.transfer)
        return None

    def placed(self, sip: OutboundCall) -> None:
        # The tab gone, even before this: the call hangs up too.
        self.gone = asyncio.ensure_future(_hang_up_when_gone(sip, self.leg, self.transfer))

    async def close(self) -> None:
        if self.gone is not None:
            self.gone.cancel()
        if self.leg is not None:
            await self.leg.close()


async def _hang_up_when_gone(
    sip: OutboundCall, leg: BrowserLeg, transfer: BrowserCallTransfer | None
) -> None:
    """The browser gone (its tab closed, its connection failed): the call too, ringing
    (CANCEL) or answered (BYE); but not once the callee is being handed on (a transfer
    taken): then the transfer's dial ends the call when it is over."""
    await leg.ended.wait()
    if transfer is None or not transfer.handing_on:
        sip.hang_up()


def _seconds_of(audio: dict[int, bytes]) -> float:
    """How long the message plays: G.711 is 8000 one-byte samples a second."""
    return max((len(samples) for samples in audio.values()), default=0) / 8000
