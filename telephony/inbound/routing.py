"""What becomes of a call to a number. The SIP user agent hands every new INVITE to
`InboundDesk.take`; in order:
- a source that is neither the trunk nor in SIP_INBOUND_SOURCES: 403, nothing recorded
  (answered by the user agent itself, which keeps no state for it);
- a number that is not provisioned, or held by nobody: 404, nothing recorded;
- an SDP offer Relay could never answer (no G.711, or plain RTP under SIP_SRTP=required):
  488, nothing recorded;
- a caller on the number's blocklist: 603 and a `blocked` record (duration 0);
- a Call-ID seen before (a re-sent INVITE): 482, nothing recorded again;
- an agent at SIP_MAX_CONCURRENT_CALLS: 486 and a `missed` record;
- a number closed now by its opening hours (outside its weekly windows, on a closed date, or
  with do-not-disturb on; virtual_numbers.hours.open_at): 180 Ringing and voicemail answers
  at once, with the closed greeting if one is set; nobody is rung (no forwarding leg, no
  browser, no `incoming_call`) and no voice application is asked (docs/decisions.md,
  issue 57);
- a number with a voice application (voiceapps): 180 Ringing, its script (a URL's asked for
  first, VOICE_HOOK_TIMEOUT at most), then the call answered and the script run on it
  (`answered`, by `app`; telephony.inbound.app_session); an application that fails to give
  a script falls back to what follows, as if it had none;
- otherwise 180 Ringing and `incoming_call` to the owner's sockets. A number that forwards
  rings its targets, when the agent has room for every leg (telephony.inbound.forwarding):
  bridged, it is `answered` by the target; a caller who hangs up first is `missed`. Else,
  and when no target took the call, voicemail answers (`answered`, with the duration from
  answer to hang-up; telephony.inbound.voicemail), after INBOUND_RING_SECONDS for a number
  that does not forward; a caller who hangs up before is `missed`.

Every call ends in exactly one history record, written with the ledger row (calls.Call,
inbound) that a crashed agent's calls are recovered from.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from core.recordings import recordings_storage
from history.models import ANONYMOUS_CALLER, CallStatus
from telephony import services
from telephony.dial import LegPlaces
from telephony.inbound.app_session import AppSession
from telephony.inbound.forwarding import Forwarder, ring_places
from telephony.inbound.numbering import caller_number, dialled_number
from telephony.inbound.voicemail import Voicemail
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech
from virtual_numbers import selectors as number_selectors
from virtual_numbers.hours import Hours
from voiceapps.selectors import voice_app_of

logger = logging.getLogger(__name__)


def source_allowed(source_host: str, trunk_host: str) -> bool:
    """Calls come from the trunk, or from SIP_INBOUND_SOURCES (addresses, networks, `any`)."""
    if source_host == trunk_host:
        return True
    try:
        address = ipaddress.ip_address(source_host)
    except ValueError:
        return False
    for allowed in settings.SIP_INBOUND_SOURCES:
        if allowed.lower() == "any":
            return True
        if address in ipaddress.ip_network(allowed, strict=False):
            return True
    return False


class InboundDesk:
    """The inbound side of one telephony agent. `db` runs a function in the agent's database
    thread; `room()` says how many more calls (a forwarded call's legs each one) the agent
    may take."""

    def __init__(
        self,
        *,
        ua,
        speech: Speech,
        db: Callable,
        room: Callable[[], int],
        places: LegPlaces,
    ):
        self.ua, self.speech, self.db, self.room = ua, speech, db, room
        # The places of the agent's capacity the voice applications' dial legs hold.
        self.places = places
        self.live: dict[str, tuple[InboundDialog, object]] = {}  # Call-ID -> (SIP, ledger row)
        self.legs = 0  # forwarding legs held (or set aside) for the calls in `live`
        self.tasks: set[asyncio.Task] = set()
        self.stopping = False
        ua.on_invite = self.take
        # The trunk may be several hosts (DNS SRV): a call from any of them is the trunk's.
        ua.accepts_source = lambda host: (
            host in ua.trunk_addresses() or source_allowed(host, ua.trunk[0])
        )

    def __len__(self) -> int:
        return len(self.live) + self.legs

    def ledger_pks(self) -> list:
        return [ledger.pk for _, ledger in self.live.values()]

    async def take(self, call: InboundDialog) -> None:
        task = asyncio.create_task(self._run(call))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def stop(self, grace: float) -> None:
        """Ringing calls are turned away, answered ones hung up; each is recorded."""
        self.stopping = True
        for call, _ in list(self.live.values()):
            call.ended.set()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=grace)

    async def _run(self, call: InboundDialog) -> None:
        try:
            await self._route(call)
        except Exception:
            logger.exception("inbound call %s: the agent failed", call.sip_call_id)
            with contextlib.suppress(Exception):
                await call.refuse(500, "Server Internal Error")
        finally:
            self.live.pop(call.sip_call_id, None)
            with contextlib.suppress(Exception):
                await call.hang_up()
            call.close()

    async def _route(self, call: InboundDialog) -> None:
        e164 = dialled_number(call.request_uri)
        number = None
        if e164 is not None:
            number = await self.db(number_selectors.number_by_e164)(e164=e164)
        if number is None:
            await call.refuse(404, "Not Found")
            return
        if call.offer is None:
            # An offer Relay could never answer (under SIP_SRTP=required, a plain one): turned
            # away at once, before anyone hears of the call, and nothing recorded.
            await call.refuse(488, "Not Acceptable Here")
            return
        caller = caller_number(call.invite.get("From") or "")
        blocked = caller != ANONYMOUS_CALLER and await self.db(number_selectors.caller_blocked)(
            number=number, caller_num=caller
        )
        ringing = not blocked and self.room() > 0 and not self.stopping
        closed = await self._closed(number) if ringing else None
        ledger = await self.db(services.inbound_call_open)(
            sip_call_id=call.sip_call_id,
            number=number,
            caller_num=caller,
            ringing=ringing and closed is None,
        )
        if ledger is None:
            await call.refuse(482, "Loop Detected")
            return
        if blocked:
            await call.refuse(603, "Decline")
            await self._record(ledger, CallStatus.BLOCKED)
            return
        if not ringing:
            await call.refuse(486, "Busy Here")
            await self._record(ledger, CallStatus.MISSED)
            return
        self.live[call.sip_call_id] = (call, ledger)
        if closed is not None:
            await self._answer_closed(call, number, ledger, closed)
            return
        app = await self.db(voice_app_of)(number=number)
        if app is not None and await self._answer_by_app(call, number, ledger, app, caller):
            return
        await self._ring_then_answer(call, number, ledger)

    async def _closed(self, number) -> Hours | None:
        """The number's hours when they have it closed at this instant, else None."""
        return await self.db(number_selectors.number_closed)(number=number, at=timezone.now())

    async def _answer_closed(self, call: InboundDialog, number, ledger, hours: Hours) -> None:
        """A closed number's call: voicemail answers at once, with the closed greeting if one
        is set; nobody is rung and no voice application asked (module docstring)."""
        logger.info("inbound call %s: closed now, voicemail answers", call.sip_call_id)
        await call.ringing()
        await self._voicemail(call, number, ledger, closed=hours)

    async def _answer_by_app(self, call: InboundDialog, number, ledger, app, caller: str) -> bool:
        """Answer with the number's voice application (telephony.inbound.app_session); False
        when it gave no script (its URL failed, or answered nothing): then forwarding and
        voicemail take the call."""
        session = AppSession(
            **self._handing(call, number, ledger), places=self.places, app=app, caller=caller
        )
        return await session.run()

    def _handing(self, call: InboundDialog, number, ledger) -> dict:
        """What the desk hands whatever takes the call on (an app session, a forwarder): its
        agent's parts, the call and its number, and how the call's end is recorded."""
        return {
            "ua": self.ua,
            "db": self.db,
            "speech": self.speech,
            "call": call,
            "number": number,
            "ledger": ledger,
            "record": lambda status, **fields: self._record(ledger, status, **fields),
        }

    async def _record(self, ledger, status: str, **kwargs) -> None:
        record = await self.db(services.inbound_call_record)(call=ledger, status=status, **kwargs)
        if record is None:
            name = kwargs.get("recording")
            if name:  # nobody will ever name it now
                await asyncio.to_thread(recordings_storage().delete, name)

    async def _ring_then_answer(self, call: InboundDialog, number, ledger) -> None:
        await call.ringing()
        # This call holds one place of the agent's capacity already; each leg takes one more.
        legs = ring_places(number)
        if legs and self.room() >= legs:
            if await self._forward(call, number, ledger, legs):
                return
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(call.ended.wait(), settings.INBOUND_RING_SECONDS)
        if call.ended.is_set() and not call.canceled.is_set():
            await call.refuse(480, "Temporarily Unavailable")  # the agent is stopping
        await self._voicemail(call, number, ledger)

    async def _voicemail(
        self, call: InboundDialog, number, ledger, *, closed: Hours | None = None
    ) -> None:
        """Voicemail answers the call (with the closed greeting of the `closed` number's hours,
        if it has one, in place of its usual one), unless it is over already: then it is
        `missed`."""
        if call.final_status:  # canceled, or turned away
            await self._record(ledger, CallStatus.MISSED)
            return
        media = await call.answer()
        if media is None:
            await self._record(ledger, CallStatus.MISSED)
            return
        # Voicemail listens for keys from the answer on, before anything is awaited: a caller
        # who presses `*` at once, while the answer is being written, is heard.
        voicemail = Voicemail(call, self.speech, self.db, number, closed=closed)
        answered = time.monotonic()
        await self.db(services.inbound_call_answered)(call=ledger)
        recording = await voicemail.run()
        await call.hang_up()
        duration = max(0, round(time.monotonic() - answered))
        await self._record(ledger, CallStatus.ANSWERED, duration=duration, **recording)

    async def _forward(self, call: InboundDialog, number, ledger, legs: int) -> bool:
        """Ring the number's targets (forwarding.Forwarder), their places held until each leg
        is over. True when the call was bridged and recorded; False when it was not (then
        voicemail answers, unless the caller is gone)."""
        held = [legs]
        self.legs += legs

        def leg_done() -> None:
            held[0] -= 1
            self.legs -= 1

        forwarder = Forwarder(**self._handing(call, number, ledger), leg_done=leg_done)
        try:
            return await forwarder.run()
        finally:
            self.legs -= held[0]  # whatever failed before its leg was dialled
