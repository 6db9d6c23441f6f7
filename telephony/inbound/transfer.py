"""Blind transfer of a forwarded call (issue 58): the phone bridged to the caller sends REFER
(RFC 3515, telephony.sip.refer) naming someone else, and the caller is handed on to them.

- The REFER is checked before it is taken: a target the dialing policy, the inventory or the
  owner's quotas refuse now is answered 403 (telephony.services.transfer_target_refusal),
  and the call goes on bridged as it was.
- Taken (202, NOTIFY "100 Trying"): the caller is unbridged from the phone and the target is
  dialled as the number's owner, with the From the ring list's legs have, as a
  `transfer_target` leg of the call (calls.Leg, a dial of its own), for the number's ring
  seconds. The phone's leg stays up meanwhile.
- The target answers: the phone is told "SIP/2.0 200 OK" (the last NOTIFY), its leg is hung
  up (BYE), and the caller is bridged to the target until either hangs up (telephony.dial).
  That target may hand the caller on again, as the phone did (its REFER, or the API): the
  transfer's own dial takes this transfer, so each hand-on is a dial inside the last one's
  bridge and a `transfer_target` leg of its own.
- It does not (no answer, busy, refused, nothing dialled): the phone is told the target's
  final response and hung up, and the caller goes to voicemail (the forwarder runs it), never
  to silence.
- Attended (the REFER's Refer-To carries `Replaces`, RFC 3891): the target's INVITE carries
  it, so that the target swaps its own call with the phone for this one; when the target does
  not take it, the phone is told so but kept, and telephony.dial bridges the caller back to
  it.
- Attended from the browser phone (`consult`): a tab's Consult holds the caller (music),
  dials the target as a `consult_target` leg and bridges it to the tab; Complete hands the
  caller on (the leg becomes the `transfer_target`), Cancel or a target that does not take
  the consultation gives the caller back to the tab (docs/telephony.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.layers import get_channel_layer

from core import events
from telephony import services
from telephony.dial import Asked, Consulted, Dial, DialResult, Ledger
from telephony.sip.race import race
from telephony.sip.refer import Refer, Refusal
from telephony.sip.uac import OutboundCall

logger = logging.getLogger(__name__)

# What the phone is told when the transfer's dial ends without a final response to report.
NO_RESPONSE = {
    "no_answer": (480, "Temporarily Unavailable"),
    "busy": (486, "Busy Here"),
    "failed": (503, "Service Unavailable"),
}


def _kept() -> None:
    """The transfer's leg holds no place of the agent's capacity of its own: it takes the
    place of the phone's leg it replaces."""


class BlindTransfer:
    """The Transfer (telephony.dial) of a forwarded call: `forwarder` is its
    forwarding.Forwarder, whose caller, number, ledger and From the transfer's leg shares
    (or their like for the callee of a call from the browser, telephony.outbound_transfer,
    with the log's `label`)."""

    def __init__(self, forwarder, *, label: str = "") -> None:
        self.forwarder = forwarder
        self.to: str | None = None  # the target of the transfer taken, once one is
        self._label = label  # "": the forwarded call's

    @property
    def label(self) -> str:
        return self._label or f"inbound call {self.forwarder.call.sip_call_id}, transferred"

    async def check(self, target: str) -> Refusal | None:
        problem = await self.forwarder.db(services.transfer_target_refusal)(
            call=self.forwarder.ledger, target=target
        )
        if problem is None and target.lower().startswith(("sip:", "sips:")):
            # Where the agent itself would send the INVITE (RFC 3263), not the host alone.
            problem = await self.forwarder.ua.uri_problem(target)
        if problem is None:
            return None
        logger.info("%s: transfer refused: %s", self.label, problem)
        return Refusal(403, f"Forbidden ({problem})")

    async def listen(self, referred: asyncio.Future) -> None:
        """While the call is bridged: a transfer asked for by the API (POST
        /api/calls/:call/transfer) or the browser phone reaches the agent through the channel
        layer (core.events.call_group) as `{"type": "call.transfer", "to": ...}`; checked as
        a REFER is, it sets `referred` (an Asked: nobody to notify)."""
        layer = get_channel_layer()
        group = events.call_group(self.forwarder.ledger.pk)
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
        except Exception as exc:  # the layer's Redis unreachable: a REFER still works
            logger.warning("%s: transfers by the API cannot reach this call: %s", self.label, exc)
            return
        try:
            while not referred.done():
                message = await layer.receive(channel)
                target = message.get("to")
                if message.get("type") != "call.transfer" or not isinstance(target, str):
                    continue
                logger.info("%s: a transfer asked for from the API or the console", self.label)
                if await self.check(target) is None and not referred.done():
                    referred.set_result(Asked(target=target))
        except Exception as exc:  # the layer failed mid-call: the call goes on, REFER works
            logger.warning(
                "%s: transfers by the API no longer reach this call: %s", self.label, exc
            )
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(layer.group_discard(group, channel))

    async def run(self, refer: Refer, sip: OutboundCall) -> DialResult:
        forwarder = self.forwarder
        call, db, ledger = forwarder.call, forwarder.db, forwarder.ledger
        self.to = refer.target
        logger.info("%s: the phone handed the call on; dialling the transfer's target", self.label)

        taken: list[bool] = []
        attended = bool(getattr(refer, "replaces", ""))

        async def answered() -> bool:
            # The target took it: the phone hears so, and hangs up before the bridge.
            taken.append(True)
            await refer.notify(200, "OK")
            sip.hang_up()
            return not call.ended.is_set()

        dial = self.target_dial(
            refer.target,
            ledger=transfer_ledger(db, ledger),
            answer=answered,
            label=self.label,
            # RFC 3891: the target replaces its call with the referrer by this one.
            headers=(("Replaces", refer.replaces),) if attended else (),
            # The target that took the call may hand it on again (its own REFER, the API):
            # each hand-on is a dial inside the last one's bridge.
            transfer=self,
        )
        try:
            result = await dial.run()
        finally:
            status, reason = _final(dial)
            await refer.notify(status, reason)  # nothing when 200 was told already
            if taken or not attended:
                sip.hang_up()  # attended and not taken: the referrer keeps the caller
        logger.info("%s: the transfer's dial ended: %s", self.label, result.status)
        return result

    def target_dial(
        self, target: str, *, ledger: Ledger, answer, label: str, headers=(), transfer=None
    ) -> Dial:
        """A dial of `target` for the forwarder's party (its caller, or a call's callee), as
        the number's owner: the forwarder's From (caller_from, then `headers`), its ring
        seconds and music on hold; the leg holds no place of the agent's capacity (_kept).
        `transfer`: who takes a hand-on of the bridge (None: the target cannot hand it on)."""
        forwarder = self.forwarder
        caller, own_headers = forwarder.caller_from()
        return Dial(
            ua=forwarder.ua,
            party=forwarder.call,
            gone=forwarder.call.ended.wait,
            targets=[target],
            ring_seconds=forwarder.number.forward_ring_seconds,
            caller=caller,
            headers=(*own_headers, *headers),
            ledger=ledger,
            leg_done=_kept,
            label=label,
            answer=answer,
            music=forwarder.music,
            transfer=transfer,
        )

    async def consult(self, asked: Consulted, ring, ring_over: asyncio.Future) -> DialResult:
        """A tab's consultation (an attended transfer from the browser phone, issue 58): the
        caller hears the music on hold, and `asked.target` is dialled as a transfer's target
        is (checked again as the owner; a `consult_target` leg). Answered, the tab of `ring`
        talks with it, told `call_consult` `answered`, until its Complete (the caller is
        handed on: the leg becomes the `transfer_target`, the tab is told `completed` and its
        side ends), its Cancel, the target's hang-up or the caller's. Not answered, refused,
        cancelled or hung up: the tab is told `returned` with the reason, and the bridge takes
        it back to the caller (telephony.dial). The tab gone meanwhile: the caller is handed on
        all the same (answered now, or when it answers; voicemail when it does not), never
        left in silence. Returns the consultation's dial's result."""
        if await self.check(asked.target) is not None:
            await ring.tell("call_consult", status="returned", reason="failed", to=asked.target)
            return DialResult("failed")
        return await Consultation(self, asked.target, ring, ring_over).run()


class Consultation:
    """One consultation of BlindTransfer.consult, its target checked: the tab's Complete and
    Cancel as they arrive (`on_consult`, from the ring), the dial of the target, and what the
    tab is told."""

    def __init__(self, transfer: BlindTransfer, target: str, ring, ring_over) -> None:
        self.transfer, self.forwarder = transfer, transfer.forwarder
        self.target, self.ring, self.ring_over = target, ring, ring_over
        self.call = self.forwarder.call
        self.label = f"inbound call {self.call.sip_call_id}, consulting"
        self.complete, self.cancel = asyncio.Event(), asyncio.Event()
        self.talked = False
        self.dial: Dial | None = None

    def on_consult(self, kind: str, message: dict) -> None:
        if kind == "rtc.consult_complete":
            self.complete.set()
        elif kind == "rtc.consult_cancel":
            self.cancel.set()
            if not self.talked and self.dial is not None:
                for sip in self.dial.sips.values():  # still ringing: CANCEL
                    sip.hang_up()

    async def answered(self) -> bool:
        """The target answered: the tab talks with it until the consultation is settled.
        True when the caller is handed on (Complete, or the tab gone meanwhile)."""
        call, ring, target = self.call, self.ring, self.target
        leg, sip = self.dial.winner.result()
        target_over = self.dial.tasks[leg.target]
        self.talked = True
        if not self.ring_over.done() and not self.cancel.is_set():
            tab, other = ring.stream, sip.stream
            tab.bridge, other.bridge = other, tab
            logger.info("%s: the target answered; the tab talks with it", self.label)
            await ring.tell("call_consult", status="answered", to=target)
            try:
                await race(
                    target_over,
                    call.ended.wait(),
                    self.ring_over,
                    self.complete.wait(),
                    self.cancel.wait(),
                    keep=(target_over, self.ring_over),
                )
            finally:
                tab.bridge = other.bridge = None
        if call.ended.is_set() or target_over.done() or self.cancel.is_set():
            return False
        # Completed, or the tab left as it consulted: the caller is handed on.
        await self.forwarder.db(services.consult_leg_completed)(leg=leg)
        call.stream.stop_music()
        logger.info("%s: the transfer completed; the caller is handed on", self.label)
        await ring.tell("call_consult", status="completed", to=target)
        ring.hang_up()
        return not call.ended.is_set()

    def _dial(self) -> Dial:
        db, ledger = self.forwarder.db, self.forwarder.ledger
        return self.transfer.target_dial(
            self.target,
            ledger=Ledger(
                open=lambda sip_call_ids: db(services.consult_legs_open)(
                    call=ledger, sip_call_ids=sip_call_ids
                ),
                bridged=lambda leg: db(services.dial_leg_bridged)(leg=leg),
                unbridged=_talked,  # the leg talked with the tab: it ends with its seconds
                ended=lambda leg, duration: db(services.leg_ended)(leg=leg, duration=duration),
            ),
            answer=self.answered,
            label=self.label,
        )

    async def run(self) -> DialResult:
        call, ring = self.call, self.ring
        self.dial = self._dial()
        ring.on_consult = self.on_consult
        call.stream.start_music()
        logger.info("%s: the caller holds; dialling the consultation's target", self.label)
        try:
            result = await self.dial.run()
        finally:
            ring.on_consult = None
            call.stream.stop_music()
        logger.info("%s: the consultation's dial ended: %s", self.label, result.status)
        if result.status != "completed" and not self.ring_over.done() and not call.ended.is_set():
            if self.cancel.is_set():
                reason = "canceled"
            elif self.talked:
                reason = "hung_up"
            else:
                reason = result.status
            await ring.tell("call_consult", status="returned", reason=reason, to=self.target)
        return result


def transfer_ledger(db, call) -> Ledger:
    """The ledger of a transfer's dial of `call`: its `transfer_target` leg
    (services.transfer_legs_open), in the agent's database thread `db`."""
    return Ledger(
        open=lambda sip_call_ids: db(services.transfer_legs_open)(
            call=call, sip_call_ids=sip_call_ids
        ),
        bridged=lambda leg: db(services.dial_leg_bridged)(leg=leg),
        unbridged=lambda leg: db(services.dial_leg_unbridged)(leg=leg),
        ended=lambda leg, duration: db(services.leg_ended)(leg=leg, duration=duration),
    )


async def _talked(leg) -> None:
    """A consultation's leg is not unbridged when the tab goes back to the caller: it talked
    (with the tab), and leg_ended gives it its seconds."""


def _final(dial: Dial) -> tuple[int, str]:
    """The target's final response as the phone is told it: its refusal (busy, declined...),
    else what the dial's status means in SIP (a target that rang out was CANCELed by Relay:
    480, not the 487 it answered the CANCEL with)."""
    for outcome in reversed(dial.outcomes):
        if outcome.kind == "rejected" and outcome.code >= 300:
            return outcome.code, outcome.phrase or "Unknown"
    return NO_RESPONSE.get(dial._unbridged_status(), NO_RESPONSE["failed"])


def last_transfer(result: DialResult) -> DialResult | None:
    """The last hand-on of a call a dial bridged (`result.transfer`, and the transfer its
    target made in turn...): whether the caller reached the last target is its status. None
    when nobody handed the call on (or an attended transfer went back to its transferor)."""
    transfer = result.transfer
    while transfer is not None and transfer.transfer is not None:
        transfer = transfer.transfer
    return transfer
