"""Blind transfer of a call placed from the browser (issue 58): the tab talks with the callee
(telephony.outbound.BrowserRun), and the API (`POST /api/calls/:call/transfer`) or the tab's
own `call_transfer` hands the callee on to someone else.

- Asked for as for an inbound call: the web process checks what it can and tells the agent
  through the channel layer (core.events.call_group, joined while the tab is bridged), and
  the agent checks the target again as the owner (the dialing policy, the inventory, the
  quotas, a SIP URI's address: telephony.inbound.transfer.BlindTransfer.check).
- Taken: the tab is unbridged, the callee hears the music on hold (the number's, else
  Relay's) while the target rings, and the target is dialled as the owner, From the call's
  own caller ID, for SIP_RING_TIMEOUT: a `transfer_target` leg of the same call (calls.Leg,
  a dial of its own). The tab's side ends as it answers (`rtc_hangup`, reason
  `transferred`), and the callee and the target are bridged until either hangs up; then the
  call ends. That target may hand the callee on again (its REFER, or the API), as the target
  of an inbound call's transfer may (BlindTransfer is the dial's transfer).
- Not taken (no answer, busy, refused, nothing dialled): the callee is given back to the tab
  when both are still on (the tab is told `call_transfer` `returned` with the reason), never
  left in silence; when the tab has gone meanwhile, the call ends (an outbound call has no
  voicemail to go to). The callee hanging up while the target rings ends the call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.conf import settings

from core import events
from telephony.dial import any_of
from telephony.inbound.transfer import BlindTransfer, transfer_ledger

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _RingSeconds:
    """What the transfer rings its target for: as long as the call rang its callee."""

    forward_ring_seconds: float


class Callee:
    """The callee of a call from the browser as the party of a transfer's dial
    (telephony.dial): its stream, and `ended` once its call is over (either end hung up)."""

    def __init__(self, sip, sip_call_id: str) -> None:
        self.sip, self.sip_call_id = sip, sip_call_id
        self.ended = asyncio.Event()
        self._watch = asyncio.ensure_future(self._watching())

    @property
    def stream(self):
        return self.sip.stream

    async def _watching(self) -> None:
        await any_of(self.sip.remote_hangup, self.sip.hangup_requested)
        self.ended.set()

    def close(self) -> None:
        self._watch.cancel()


class BrowserCallTransfer:
    """The transfers of one call from the browser (`record`, the ledger's Call): what
    BrowserTalk asks while the tab is bridged. `db` runs a function in the agent's database
    thread; `music` is the callee's music on hold (None: Relay's own). `handing_on` is true
    from the moment a transfer is taken: the tab leaving then no longer ends the call."""

    def __init__(
        self,
        *,
        ua,
        db: Callable,
        record,
        music: Callable[[int], Awaitable[bytes | None]] | None = None,
    ) -> None:
        self.ua, self.db, self.ledger, self.music = ua, db, record, music
        self.number = _RingSeconds(settings.SIP_RING_TIMEOUT)
        self.call: Callee | None = None  # the callee, once a transfer is taken
        self.handing_on = False
        self.transfer = BlindTransfer(self, label=f"call {record.pk}, transferred")

    def caller_from(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The From of the transfer's leg: the call's own caller ID, no Diversion (the call is
        the owner's, not someone else's forwarded)."""
        return self.ledger.caller_id, ()

    async def asked(self) -> str:
        """The target of a transfer asked for from the API or the tab, checked as the owner;
        never returns when the channel layer cannot be reached (the tab still talks)."""
        referred = asyncio.get_running_loop().create_future()
        await self.transfer.listen(referred)
        if not referred.done():
            await asyncio.Event().wait()
        return referred.result().target

    async def hand_on(self, target: str, sip, leg) -> bool:
        """Hand the callee of `sip` on to `target`, the tab's `leg` unbridged: True when the tab
        has the callee back (the target did not take it, both still on), else False (the
        callee was bridged to the target until that was over, or someone has gone: the
        call ends)."""
        record, db = self.ledger, self.db
        label = self.transfer.label
        callee = self.call = Callee(sip, record.sip_call_id)
        self.handing_on = True
        taken: list[bool] = []

        async def answered() -> bool:
            # The target took it: the tab's side ends before the bridge.
            taken.append(True)
            callee.stream.stop_music()
            await self._tell({"type": "rtc_hangup", "reason": "transferred", "to": target})
            await leg.close()
            return not callee.ended.is_set()

        dial = self.transfer.target_dial(
            target,
            ledger=transfer_ledger(db, record),
            answer=answered,
            label=label,
            transfer=self.transfer,  # the target may hand the callee on again
        )
        logger.info("%s: the tab handed the callee on; dialling the transfer's target", label)
        callee.stream.start_music()  # never silence while the target rings
        try:
            result = await dial.run()
        finally:
            callee.stream.stop_music()
            callee.close()
        logger.info("%s: the transfer's dial ended: %s", label, result.status)
        if taken or callee.ended.is_set() or leg.ended.is_set():
            return False
        self.handing_on = False
        logger.info("%s: the transfer was not taken; back to the tab", label)
        await self._tell(
            {"type": "call_transfer", "to": target, "status": "returned", "reason": result.status}
        )
        return True

    async def _tell(self, frame: dict) -> None:
        """A frame about the call to its owner's sockets (the tab among them)."""
        record = self.ledger
        frame = {**frame, "callId": record.call_id, "call": str(record.pk)}
        message = {"type": "relay.event", "event": frame}
        await events.send_collected([(events.user_group(record.owner_id), message)])
