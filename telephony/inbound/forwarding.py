"""Forwarding: a call to a number rings its owner's phones (Number.forward_*), and the first
to take it is bridged to the caller. Routing (telephony.inbound.routing) hands it a call that
is ringing (180 sent) on a number with targets, when the agent has room for every leg.

- The targets are rung and the first to take the call bridged by telephony.dial (each
  target still allowed dialled once, its calls.Leg written before; answer on bridge). From
  is the caller, with the number in a Diversion header (RFC 5806), or the number.
- With screening, the target that answers hears "Call for <alias> from <caller>. Press 1 to
  accept", and is bridged only on 1 within SCREENING_SECONDS of the prompt; another key or
  silence hangs that leg up.
- Bridged, the call is recorded `answered` by the target once either end hangs up or the
  bridge reaches its cap.
- No leg accepted (no answer within ringSeconds, busy, failed, declined): run() returns
  False, and voicemail answers. A caller who hangs up first is `missed`, every leg CANCELed.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable

from django.conf import settings

from core.webrtc import BROWSER
from history.models import ANONYMOUS_CALLER, CallStatus
from telephony import services
from telephony.dial import Dial, Ledger, diversion
from telephony.sip.race import race, won
from telephony.sip.uac import OutboundCall
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech, SpeechError
from telephony.webrtc.leg import agent_ice_servers
from telephony.webrtc.ring import BrowserRing
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

    async def run(self) -> bool:
        """Ring the targets. True when a target was bridged and the call recorded; False when
        none was (no answer, the caller hung up, the agent stops...): every leg is over
        then, and the caller of this method answers the call or records it."""
        number, ledger, db = self.number, self.ledger, self.db
        caller, headers = self._from()
        dial = Dial(
            ua=self.ua,
            party=self.call,
            gone=self.call.ended.wait,
            targets=list(number.forward_targets),
            ring_seconds=number.forward_ring_seconds,
            caller=caller,
            headers=headers,
            ledger=Ledger(
                open=lambda sip_call_ids: db(services.forward_legs_open)(
                    call=ledger, number=number, sip_call_ids=sip_call_ids
                ),
                bridged=lambda leg: (
                    db(services.forward_browser_bridged)(call=ledger)
                    if leg.target == BROWSER
                    else db(services.forward_leg_bridged)(call=ledger, leg=leg)
                ),
                unbridged=lambda leg: (
                    db(services.forward_browser_unbridged)(call=ledger)
                    if leg.target == BROWSER
                    else db(services.forward_leg_unbridged)(call=ledger, leg=leg)
                ),
                ended=lambda leg, duration: db(services.leg_ended)(leg=leg, duration=duration),
            ),
            leg_done=self.leg_done,
            label=f"inbound call {self.call.sip_call_id}",
            answer=self._answer,
            screen=self._screened if number.forward_screening else None,
            browser=self._browser_ring() if BROWSER in number.forward_targets else None,
        )
        result = await dial.run()
        if result.status != "completed":
            return False
        await self.call.hang_up()
        await self.record(CallStatus.ANSWERED, duration=result.duration)
        return True

    def _browser_ring(self) -> BrowserRing:
        """The ring of the owner's tabs: they are sent `incoming_call` with `ringBrowser`,
        the caller and the number's alias, the call's ledger id (`call`), and the ring's own
        id as `ring` (never a row's: it names this ring in the tabs' frames, and nothing
        else). `callId` repeats the ring for tabs of the release before (deprecated: a
        `callId` is a client's id of a call it placed)."""
        number = self.number
        ring = f"ring-{secrets.token_hex(8)}"
        frame = {
            **services.incoming_call_event(call=self.ledger, number=number),
            "ring": ring,
            "callId": ring,
            "alias": number.alias,
            "ringBrowser": True,
        }
        return BrowserRing(
            owner_id=number.owner_id,
            frame=frame,
            ice_servers=agent_ice_servers(),
            ports=self.ua.config.rtc_ports,
            label=f"inbound call {self.call.sip_call_id}",
        )

    async def _answer(self) -> bool:
        return await self.call.answer() is not None

    def _from(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The legs' From user, and their extra headers: the caller with a Diversion header
        naming the number (RFC 5806), or the number itself."""
        number = self.number
        if number.forward_caller_id == ForwardCallerId.NUMBER:
            return number.number, ()
        return self.ledger.caller_id, diversion(self.ua, number.number)

    async def _screened(self, sip: OutboundCall) -> bool:
        """Say who calls, and wait for the target's 1 (pressed during the prompt or within
        SCREENING_SECONDS after it). Any other key, silence or the caller leaving: no."""
        keys: asyncio.Queue[str] = asyncio.Queue()
        sip.stream.on_dtmf = keys.put_nowait
        prompt = screening_prompt(self.number.alias, self.ledger.caller_id)
        try:
            audio = await asyncio.to_thread(
                self.speech.render, prompt, settings.TTS_DEFAULT_LANGUAGE
            )
        except SpeechError:
            audio = {}  # the key is waited for all the same
        key = asyncio.ensure_future(keys.get())  # pressed during the prompt, or after it
        try:
            playing = sip.stream.play(audio.get(sip.stream.payload_type, b""))
            await race(key, self.call.ended.wait(), playing, keep=(key,))
            if not key.done() and not self.call.ended.is_set():
                await race(key, self.call.ended.wait(), timeout=SCREENING_SECONDS)
            return won(key) and key.result() == ACCEPT_KEY and not self.call.ended.is_set()
        finally:
            key.cancel()
            sip.stream.on_dtmf = None
