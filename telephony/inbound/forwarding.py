"""Forwarding: a call to a number rings its owner's phones (Number.forward_*), and the first
to take it is bridged to the caller. Routing (telephony.inbound.routing) hands it a call that
is ringing (180 sent) on a number with targets, when the agent has room for every leg.

- Each target still allowed (forwarding_targets_dialable) is dialled through the trunk as
  its own INVITE, all at once; its ledger row (telephony.models.ForwardLeg) is written
  before, so a target is dialled at most once per call, and counts in the owner's quotas.
  From is the caller, with the number in a Diversion header (RFC 5806), or the number.
- With screening, the target that answers hears "Call for <alias> from <caller>. Press 1 to
  accept", and is bridged only on 1 within SCREENING_SECONDS of the prompt; another key or
  silence hangs that leg up.
- The first leg to be accepted wins: every other leg is cancelled (CANCEL, or BYE if it
  answered meanwhile), the caller gets 200 OK only now ("answer on bridge"), and the two
  streams relay each other's RTP (rtp.RtpStream.relay: PCMU and PCMA transcoded, RFC 4733
  events re-typed) until either end hangs up or the bridge reaches its cap
  (SIP_MAX_CALL_SECONDS, or less when the owner's answered seconds run short).
- No leg accepted (no answer within ringSeconds, busy, failed, declined): run() returns
  False, and voicemail answers. A caller who hangs up first is `missed`, every leg CANCELed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from django.conf import settings

from history.models import ANONYMOUS_CALLER, CallStatus
from telephony import services
from telephony.sip import sdp
from telephony.sip.message import new_call_id
from telephony.sip.uac import OutboundCall
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech, SpeechError
from virtual_numbers.models import ForwardCallerId

logger = logging.getLogger(__name__)

SCREENING_SECONDS = 10.0  # after the prompt, for the target's 1
ACCEPT_KEY = "1"


def screening_prompt(alias: str, caller: str) -> str:
    """What a screened target hears. The caller's number digit by digit, as people read it."""
    who = "an unknown number" if caller == ANONYMOUS_CALLER else " ".join(caller.lstrip("+"))
    return f"Call for {alias or 'your number'} from {who}. Press 1 to accept."


class Forwarder:
    """One inbound call's forwarding. `record(status, **fields)` writes the call's one
    history record (InboundDesk._record); `leg_done()` gives one leg's agent capacity back."""

    def __init__(
        self,
        *,
        ua,
        db: Callable,
        speech: Speech,
        call: InboundDialog,
        number,
        ledger,
        record: Callable,
        leg_done: Callable[[], None],
    ) -> None:
        self.ua, self.db, self.speech = ua, db, speech
        self.call, self.number, self.ledger = call, number, ledger
        self.record, self.leg_done = record, leg_done
        self.winner: asyncio.Future = asyncio.get_running_loop().create_future()
        self.bridge_over = asyncio.Event()
        self.sips: dict[str, OutboundCall] = {}  # target -> its leg's SIP call
        self.tasks: dict[str, asyncio.Task] = {}  # target -> its leg's task

    async def run(self) -> bool:
        """Ring the targets. True when a target was bridged and the call recorded; False when
        none was (no answer, the caller hung up, the agent stops...): every leg is over
        then, and the caller of this method answers the call or records it."""
        number = self.number
        call_ids = {target: new_call_id(self.ua.host) for target in number.forward_targets}
        legs = await self.db(services.forward_legs_open)(
            call=self.ledger, number=number, call_ids=call_ids
        )
        if skipped := len(call_ids) - len(legs):
            logger.info(
                "inbound call %s: %d of %d forwarding target(s) not dialled (refused by the "
                "dialing policy or the owner's quotas)",
                self.call.call_id,
                skipped,
                len(call_ids),
            )
        for _ in range(skipped):
            self.leg_done()  # the capacity of targets not dialled
        if not legs:
            return False
        for leg in legs:
            self.tasks[leg.target] = asyncio.create_task(self._leg(leg))
        dialling = list(self.tasks.values())
        caller_gone = asyncio.ensure_future(self.call.ended.wait())
        all_done = asyncio.ensure_future(asyncio.wait(dialling))
        try:
            await asyncio.wait(
                {self.winner, caller_gone, all_done}, return_when=asyncio.FIRST_COMPLETED
            )
            if (
                self.winner.done()
                and not self.call.ended.is_set()
                and await self._bridge(*self.winner.result())
            ):
                return True
        finally:
            caller_gone.cancel()
            self.bridge_over.set()
            for sip in self.sips.values():
                sip.hang_up()
            # The legs' CANCEL (or BYE) transactions are seen out before voicemail answers.
            await asyncio.wait(dialling)
            all_done.cancel()
        return False

    def _from(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The legs' From user, and their extra headers: the caller with a Diversion header
        naming the number (RFC 5806), or the number itself."""
        number = self.number
        if number.forward_caller_id == ForwardCallerId.NUMBER:
            return number.number, ()
        host = self.ua.host
        diversion = f"<{self.ua.scheme}:{number.number}@{host}>;reason=unconditional;counter=1"
        return self.ledger.caller_num, (("Diversion", diversion),)

    async def _leg(self, leg) -> None:
        """Dial one target; it talks (screening, then the bridge) through `_talk`."""
        caller, headers = self._from()
        sip = self.ua.place(
            call_id=leg.sip_call_id,
            to=leg.target,
            caller=caller,
            audio={},
            ring_timeout=self.number.forward_ring_seconds,
            max_seconds=settings.SIP_MAX_CALL_SECONDS,
            on_ringing=_nothing,
            on_answered=_nothing,
            talk=lambda answered: self._talk(leg, answered),
            headers=headers,
        )
        self.sips[leg.target] = sip
        duration = 0
        try:
            if self.call.ended.is_set():
                return  # the caller hung up before this leg was dialled
            outcome = await sip.run()
            if self.winner.done() and self.winner.result()[0] is leg:
                duration = max(0, round(outcome.duration or 0))
            logger.info(
                "inbound call %s: forwarding leg %s ended: %s %s",
                self.call.call_id,
                sip.call_id,
                outcome.kind,
                outcome.code or "",
            )
        except Exception:
            logger.exception("inbound call %s: forwarding leg %s failed", self.call.call_id, leg.pk)
        finally:
            with contextlib.suppress(Exception):
                await self.db(services.forward_leg_ended)(leg=leg, duration=duration)
            self.leg_done()

    async def _talk(self, leg, sip: OutboundCall) -> None:
        """An answered leg: screened if asked, then offered to win; the winner talks until the
        bridge is over. Returning hangs the leg up."""
        if self.number.forward_screening and not await self._screened(sip):
            return
        if self.winner.done() or self.call.ended.is_set():
            return
        self.winner.set_result((leg, sip))
        await self.bridge_over.wait()

    async def _screened(self, sip: OutboundCall) -> bool:
        """Say who calls, and wait for the target's 1 (pressed during the prompt or within
        SCREENING_SECONDS after it). Any other key, silence or the caller leaving: no."""
        keys: asyncio.Queue[str] = asyncio.Queue()
        sip.stream.on_dtmf = keys.put_nowait
        prompt = screening_prompt(self.number.alias, self.ledger.caller_num)
        try:
            audio = await asyncio.to_thread(
                self.speech.render, prompt, settings.TTS_DEFAULT_LANGUAGE
            )
        except SpeechError:
            audio = {}  # the key is waited for all the same
        key = asyncio.ensure_future(keys.get())
        gone = asyncio.ensure_future(self.call.ended.wait())
        player = asyncio.ensure_future(sip.stream.play(audio.get(sip.stream.payload_type, b"")))
        try:
            await asyncio.wait({key, gone, player}, return_when=asyncio.FIRST_COMPLETED)
            player.cancel()
            if not key.done() and not gone.done():
                await asyncio.wait(
                    {key, gone}, timeout=SCREENING_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
            return key.done() and key.result() == ACCEPT_KEY and not self.call.ended.is_set()
        finally:
            for waiting in (key, gone, player):
                waiting.cancel()
            sip.stream.on_dtmf = None

    async def _bridge(self, leg, sip: OutboundCall) -> bool:
        """Answer the caller and relay the two legs' media until either hangs up or the cap;
        then record the call answered by `leg`. False when the owner has no answered seconds
        left to bridge it: then the leg is hung up, and voicemail answers."""
        for target, other in self.sips.items():
            if target != leg.target:
                other.hang_up()
        grant = await self.db(services.forward_leg_bridged)(call=self.ledger, leg=leg)
        if grant == 0:
            logger.info("inbound call %s: no answered seconds left to bridge", self.call.call_id)
            return False
        if await self.call.answer() is None:  # the caller hung up a moment ago
            await self.db(services.forward_leg_unbridged)(call=self.ledger, leg=leg)
            return False
        bridged = time.monotonic()
        caller_stream, target_stream = self.call.stream, sip.stream
        caller_stream.bridge, target_stream.bridge = target_stream, caller_stream
        cap = settings.SIP_MAX_CALL_SECONDS
        if grant is not None:
            cap = min(cap, grant)
        leg_over = self.tasks[leg.target]
        caller_over = asyncio.ensure_future(self.call.ended.wait())
        try:
            await asyncio.wait(
                {leg_over, caller_over}, timeout=cap, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            caller_over.cancel()
            caller_stream.bridge = target_stream.bridge = None
        self.bridge_over.set()
        sip.hang_up()
        await self.call.hang_up()
        duration = max(0, round(time.monotonic() - bridged))
        logger.info(
            "inbound call %s: bridged %d s (caller %s, target %s); relayed %d packets to the "
            "target, %d to the caller",
            self.call.call_id,
            duration,
            sdp.CODECS.get(caller_stream.payload_type),
            sdp.CODECS.get(target_stream.payload_type),
            target_stream.relayed_packets,
            caller_stream.relayed_packets,
        )
        await self.record(CallStatus.ANSWERED, duration=duration)
        return True


async def _nothing() -> None:
    return None
