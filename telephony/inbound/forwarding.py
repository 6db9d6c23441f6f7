"""Forwarding and ring groups: a call to a number rings its ring list (Number.ring_*, issue
57; PUT .../forwarding writes the same list), and the first to take it is bridged to the
caller. Routing (telephony.inbound.routing) hands it a call that is ringing (180 sent) on a
number with a list, when the agent has room for its legs (ring_places).

- The list is read as it rings now (services.ring_list_now): an entry naming someone no
  longer the owner nor an active member is skipped and logged. A phone entry is dialled
  through the trunk, a sip: entry to its URI directly, a member entry rings that person's
  tabs with Phone on (BrowserRing) and their profile's ring phone. `all` rings every entry
  at once for its own seconds; `in_order` one entry after another, each for its seconds.
- The targets are rung and the first to take the call bridged by telephony.dial (each
  target still allowed dialled once per call, its calls.Leg written before with its entry
  and member; answer on bridge); the others get CANCEL with Reason "Call completed
  elsewhere" (RFC 3326), their tabs `answered_elsewhere`. From is the caller, with the
  number in a Diversion header (RFC 5806), or the number.
- A member removed while the list rings them (read again every MEMBER_WATCH_SECONDS): their
  tabs stop (`removed`) and their phone's leg is cancelled.
- With screening, the target that answers hears "Call for <alias> from <caller>. Press 1 to
  accept", and is bridged only on 1 within SCREENING_SECONDS of the prompt; another key or
  silence hangs that leg up.
- Bridged, the call is recorded `answered` by the target once either end hangs up or the
  bridge reaches its cap.
- A bridged SIP target may hand the call on with REFER (blind transfer, issue 58:
  telephony.inbound.transfer): the caller is bridged to the new target, or, when it does not
  take the call, voicemail answers; the call is recorded `answered` either way. A tab that
  took the call may consult someone first (an attended transfer, BlindTransfer.consult).
- No leg accepted (no answer within ringSeconds, busy, failed, declined): run() returns
  False, and voicemail answers. A caller who hangs up first is `missed`, every leg CANCELed.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections.abc import Callable

from django.conf import settings

from core.webrtc import BROWSER
from history.models import ANONYMOUS_CALLER, CallStatus
from telephony import services
from telephony.dial import Dial, Ledger, RingTarget, diversion, number_music, recorded_for
from telephony.inbound.transfer import BlindTransfer, last_transfer
from telephony.inbound.voicemail import Voicemail
from telephony.sip.race import race, won
from telephony.sip.uac import OutboundCall
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech, SpeechError
from telephony.webrtc.leg import agent_ice_servers
from telephony.webrtc.ring import BrowserRing
from virtual_numbers.models import ForwardCallerId, RingStrategy

logger = logging.getLogger(__name__)

SCREENING_SECONDS = 10.0  # after the prompt, for the target's 1
MEMBER_WATCH_SECONDS = 1.0  # how often a ringing list's members are read again


def ring_places(number) -> int:
    """The places of the agent's capacity a call to `number` holds for its ring list at most:
    each entry's legs (a member's tabs, and their phone) at once for `all`, the largest
    entry's for `in_order`."""
    sizes = [2 if "member" in entry else 1 for entry in number.ring_entries]
    if not sizes:
        return 0
    return sum(sizes) if number.ring_strategy == RingStrategy.ALL else max(sizes)


def _kept() -> None:
    """A leg's place, kept until the whole list is over (in_order: one entry at a time)."""


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
        self.dials: list[Dial] = []  # the list's dials so far (in_order: one per entry)
        # What either end of a bridge hears while the other holds: the number's music on hold.
        self.music = number_music(speech, number.hold_music)

    async def run(self) -> bool:
        """Ring the ring list. True when a target was bridged and the call recorded; False
        when none was (no answer, the caller hung up, the agent stops...): every leg is over
        then, and the caller of this method answers the call or records it."""
        number, db = self.number, self.db
        label = f"inbound call {self.call.sip_call_id}"
        entries = await db(services.ring_list_now)(number=number, label=label)
        if number.ring_strategy == RingStrategy.IN_ORDER:
            steps = [self._targets([entry]) for entry in entries]
        else:
            steps = [self._targets(entries)]
        places = ring_places(number)
        if number.ring_strategy == RingStrategy.ALL:
            # The places held for entries that ring nothing now are given back at once; the
            # dial gives back the others, each as its leg ends.
            for _ in range(max(0, places - len(steps[0]))):
                self.leg_done()
            leg_done = self.leg_done
        else:
            leg_done = _kept  # one entry at a time: the places are held to the end
        watch = asyncio.create_task(self._watch_members(steps))
        try:
            for index, targets in enumerate(steps):
                if self.call.ended.is_set():
                    break
                if not targets:
                    continue
                if index:
                    logger.info("%s: ringing the next entry of the list", label)
                dial = self._dial(targets, leg_done, label)
                self.dials.append(dial)
                result = await dial.run()
                if result.status == "completed":
                    duration, recording = result.duration, {}
                    if self._transfer_missed(result):
                        # Handed on to someone who did not take it: voicemail, never silence.
                        started = time.monotonic()
                        recording = await self._voicemail()
                        duration += max(0, round(time.monotonic() - started))
                    await self.call.hang_up()
                    await self.record(CallStatus.ANSWERED, duration=duration, **recording)
                    return True
        finally:
            watch.cancel()
        return False

    def _transfer_missed(self, result) -> bool:
        """Whether the bridged target handed the call on (REFER, telephony.inbound.transfer)
        to a target that did not take it, the caller still on the line."""
        transfer = last_transfer(result)
        return (
            transfer is not None and transfer.status != "completed" and not self.call.ended.is_set()
        )

    async def _voicemail(self) -> dict:
        """Voicemail on the answered call: the recording's fields for the record."""
        logger.info("inbound call %s: the transfer was not taken; voicemail", self.call.sip_call_id)
        return await Voicemail(self.call, self.speech, self.db, self.number).run()

    def _targets(self, entries: list) -> list[RingTarget]:
        """What `entries` ring (services.RingEntry): each phone and SIP URI once, and for a
        member their tabs and their profile's ring phone."""
        targets: list[RingTarget] = []
        seen: set[str] = set()
        for entry in entries:
            if entry.kind == "member":
                ring = self._browser_ring(entry.target)
                targets.append(
                    RingTarget(BROWSER, entry.seconds, entry.entry, entry.target, ring=ring)
                )
                if entry.ring_phone and entry.ring_phone not in seen:
                    seen.add(entry.ring_phone)
                    targets.append(
                        RingTarget(entry.ring_phone, entry.seconds, entry.entry, entry.target)
                    )
            elif entry.target not in seen:
                seen.add(entry.target)
                targets.append(RingTarget(entry.target, entry.seconds, entry.entry))
        return targets

    def _dial(self, targets: list[RingTarget], leg_done, label: str) -> Dial:
        number, ledger, db = self.number, self.ledger, self.db
        caller, headers = self.caller_from()
        entries = {
            t.target: (t.entry, t.member and uuid.UUID(str(t.member)))
            for t in targets
            if t.ring is None
        }
        return Dial(
            ua=self.ua,
            party=self.call,
            gone=self.call.ended.wait,
            targets=[t.target for t in targets],
            ring_seconds=number.forward_ring_seconds,
            rings=targets,
            caller=caller,
            headers=headers,
            ledger=Ledger(
                open=lambda sip_call_ids: db(services.forward_legs_open)(
                    call=ledger, number=number, sip_call_ids=sip_call_ids, entries=entries
                ),
                bridged=lambda leg: (
                    db(services.forward_browser_bridged)(
                        call=ledger, user_id=leg.user_id, entry=leg.entry
                    )
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
            leg_done=leg_done,
            label=label,
            answer=self._answer,
            screen=self._screened if number.forward_screening else None,
            music=self.music,
            recorded=(
                recorded_for(db, self.speech, call_id=ledger.pk, announce=number.recording_announce)
                if number.recording_enabled
                else None
            ),
            transfer=BlindTransfer(self),
        )

    async def _watch_members(self, steps: list[list[RingTarget]]) -> None:
        """A member removed from the number (or who left) while the list rings them: their
        tabs stop (told `removed`) and the leg of their phone is cancelled. The owner's
        entries need no watch; members' are read again every MEMBER_WATCH_SECONDS."""
        theirs = [t for step in steps for t in step if t.member is not None]
        owner = str(self.number.owner_id)
        if not any(str(t.member) != owner for t in theirs):
            return
        while True:
            await asyncio.sleep(MEMBER_WATCH_SECONDS)
            members = await self.db(services.ring_member_ids)(number_id=self.number.pk)
            for target in theirs:
                if str(target.member) in members:
                    continue
                if target.ring is not None and not target.ring.removed:
                    logger.info(
                        "inbound call %s: user %s is no member of the number now: their "
                        "tabs stop, their phone's leg is cancelled",
                        self.call.sip_call_id,
                        target.member,
                    )
                    target.ring.remove()
                elif target.ring is None:
                    self._cancel_phone(target)

    def _cancel_phone(self, target: RingTarget) -> None:
        for dial in self.dials:
            sip = dial.sips.get(target.target)
            if sip is not None and not (dial.winner.done() and dial.winner.result()[1] is sip):
                sip.hang_up()

    def _browser_ring(self, user_id) -> BrowserRing:
        """The ring of a person's tabs (`user_id`: the owner's or a member's): they are sent
        `incoming_call` with `ringBrowser`, the caller and the number's alias, the call's
        ledger id (`call`), and the ring's own id as `ring` (never a row's: it names this ring
        in the tabs' frames, and nothing else). `callId` repeats the ring for tabs of the
        release before (deprecated: a `callId` is a client's id of a call it placed)."""
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
            owner_id=user_id,
            frame=frame,
            ice_servers=agent_ice_servers(),
            ports=self.ua.config.rtc_ports,
            label=f"inbound call {self.call.sip_call_id}",
        )

    async def _answer(self) -> bool:
        return await self.call.answer() is not None

    def caller_from(self) -> tuple[str, tuple[tuple[str, str], ...]]:
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
