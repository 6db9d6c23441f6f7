"""A call to a number answered by the number's voice application (voiceapps; docs/voice-apps.md):
the desk (telephony.inbound.routing) chooses it for a number that has one, once the call is
ringing and in the ledger, and starts it; this module holds the rest of the call.

- The script is the application's own, or what its URL answers (the hook's request on a
  thread, VOICE_HOOK_TIMEOUT at most). A URL that gives none leaves the call to the desk:
  forwarding and voicemail take it, as if the number had no application.
- The call is answered before the script's first verb that is not a dial; a script that
  starts with a dial rings on until a target answers (answer on bridge,
  telephony.scripted). The caller's keys are heard from the answer on.
- What a `record` records is the call's one message, as voicemail's is: a later record's
  file replaces an earlier one's. What the verbs report stays with the hooks: an incoming
  call has no timeline of states to hold it.
- Its end is the call's one history record: `answered` by `app`, with the seconds from the
  answer to the hang-up and the message; or `missed` (480) when the caller hung up while it
  rang, or the script ended before it answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from django.conf import settings

from core.recordings import recordings_storage
from history.models import ANONYMOUS_CALLER, AnsweredBy, CallStatus
from telephony import services
from telephony.dial import Dialing, LegPlaces, diversion, number_music, recorded_for, script_ledger
from telephony.scripted import ScriptedTalk
from telephony.sip.race import race
from telephony.sip.uac import TALK_STOP_SECONDS
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech
from voiceapps.hooks import hook_request

# Its lines keep the logger they had while the desk ran the application itself: operators'
# filters and alerts name it.
logger = logging.getLogger("telephony.inbound.routing")


async def _unreported(reports: list[dict]) -> None:
    """What an incoming call's verbs report stays with its hooks: such a call has no timeline
    of states to hold it (docs/voice-apps.md)."""


class AppSession:
    """One incoming call's run of its number's voice application `app`. `caller` is who
    called (caller_number); `ledger` the call's ledger row; `record(status, **fields)`
    writes the call's one history record (InboundDesk._record)."""

    def __init__(
        self,
        *,
        ua,
        db: Callable,
        speech: Speech,
        places: LegPlaces,
        call: InboundDialog,
        number,
        ledger,
        app,
        caller: str,
        record: Callable[..., Awaitable[None]],
    ) -> None:
        self.ua, self.db, self.speech, self.places = ua, db, speech, places
        self.call, self.number, self.ledger, self.app = call, number, ledger, app
        self.caller, self.record = caller, record
        # `call` names the call as every frame does; `sipCallId` is its SIP Call-ID, which
        # `callId` carried until now and carries one release more (deprecated: `callId` is a
        # client's id of an outbound call, and an inbound call has none).
        self.identity = {
            "call": str(ledger.pk),
            "sipCallId": call.sip_call_id,
            "callId": call.sip_call_id,
            "direction": "inbound",
            "from": caller,
            "to": number.number,
            "numberId": str(number.pk),
        }
        self.kept: dict = {}  # the call's one message: what its last `record` recorded
        self.answered_at: float | None = None  # time.monotonic() at the answer

    async def run(self) -> bool:
        """Ring, then run the script and record the call; False when the application gave
        no script (its URL failed, or answered nothing): the call is left ringing, for
        forwarding and voicemail."""
        await self.call.ringing()
        script = self.app.script
        if self.app.url:
            script = await self._script_of_url()
            if script is None:
                return False
        await self._talk(script)
        await self._end()
        return True

    async def _script_of_url(self) -> list[dict] | None:
        """The script the application's URL answers with; None when it gave none."""
        answer = await asyncio.to_thread(
            hook_request, url=self.app.url, payload=self.identity, user_id=self.number.owner_id
        )
        if answer.script is None:
            logger.warning(
                "inbound call %s: the voice application gave no script (%s); "
                "forwarding and voicemail take it",
                self.call.sip_call_id,
                answer.failure or "it answered none",
            )
        return answer.script

    async def _talk(self, script: list[dict]) -> None:
        """Run `script` until it ends or the caller hangs up."""
        call = self.call
        talking = asyncio.ensure_future(self._scripted_talk(script)(call))
        try:
            await race(talking, call.ended.wait())
        finally:
            # A recording under way is saved as the talk stops, and a dial sees its legs
            # out: the record waits for that, a moment at most.
            await asyncio.wait({talking}, timeout=TALK_STOP_SECONDS)
        if talking.done() and not talking.cancelled() and talking.exception() is not None:
            logger.error(
                "inbound call %s: its voice application failed",
                call.sip_call_id,
                exc_info=talking.exception(),
            )

    def _scripted_talk(self, script: list[dict]) -> ScriptedTalk:
        number = self.number
        return ScriptedTalk(
            script=script,
            identity=self.identity,
            owner_id=number.owner_id,
            language=settings.TTS_DEFAULT_LANGUAGE,
            label=f"inbound call {self.call.sip_call_id}",
            speech=self.speech,
            report=_unreported,
            store=self._keep,
            dialing=Dialing(
                ua=self.ua,
                places=self.places,
                ledger=lambda dial: script_ledger(
                    self.db, owner_id=number.owner_id, dial=dial, call=self.ledger
                ),
                caller_ids=self._caller_ids(),
                gone=self.call.ended.wait,
                recorded=lambda: recorded_for(
                    self.db, self.speech, call_id=self.ledger.pk, announce=number.recording_announce
                ),
                music=number_music(self.speech, number.hold_music),
            ),
            answer=self._answer,
        )

    def _caller_ids(self) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
        """A dial's From by its callerId: the number itself, or the caller with the number in
        a Diversion header (the number, when the caller is anonymous)."""
        number = self.number.number
        if self.caller == ANONYMOUS_CALLER:
            return {"caller": (number, ()), "number": (number, ())}
        return {"caller": (self.caller, diversion(self.ua, number)), "number": (number, ())}

    async def _answer(self, on_key: Callable[[str], None]) -> bool:
        """Answer the call, its keys handed to `on_key` from then on; False when the caller
        hung up while it rang."""
        call = self.call
        if await call.answer() is None:
            return False
        # The caller's keys are heard from the answer on, before anything is awaited.
        call.stream.on_dtmf = on_key
        self.answered_at = time.monotonic()
        await self.db(services.inbound_call_answered)(call=self.ledger, by_app=True)
        return True

    async def _keep(self, recording_id, name: str, seconds: float) -> None:
        if self.kept:  # an earlier record's file: nobody will ever name it now
            await asyncio.to_thread(recordings_storage().delete, self.kept["recording"])
        self.kept.update(recording=name, recording_seconds=seconds)

    async def _end(self) -> None:
        """The call's one history record, and its hang-up when it was answered."""
        if self.answered_at is None:  # the caller hung up while it rang, or the script ended
            await self.call.refuse(480, "Temporarily Unavailable")
            await self.record(CallStatus.MISSED)
            return
        await self.call.hang_up()
        duration = max(0, round(time.monotonic() - self.answered_at))
        await self.record(
            CallStatus.ANSWERED, duration=duration, answered_by=AnsweredBy.APP, **self.kept
        )
