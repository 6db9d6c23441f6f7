"""The inbound-call ledger (telephony.models.InboundCall): every write of it, each in the
transaction that reports it, so that every inbound call ends in exactly one history record."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import events
from core.errors import NotFound
from core.fields import to_ms
from history.models import AnsweredBy, CallRecord, CallStatus
from history.services import record_inbound_call
from telephony.models import InboundCall
from virtual_numbers.models import Number


def incoming_call_event(call: InboundCall, number: Number) -> dict:
    """The `incoming_call` frame: a call is ringing on one of the owner's numbers."""
    return {
        "type": "incoming_call",
        "number_id": str(number.pk),
        "number": number.number,
        "caller_num": call.caller_num,
        "ts": to_ms(call.started_at),
    }


def _deadline():
    return timezone.now() + timedelta(seconds=settings.CALL_RECOVERY_GRACE)


def inbound_call_open(*, sip_call_id: str, number: Number, caller_num: str, ringing: bool):
    """Start the ledger of an inbound call; with `ringing`, push `incoming_call` to the owner
    after commit. None when this Call-ID was seen before (a re-sent INVITE): nothing is
    written, and the caller of this service must not record it again."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                call = InboundCall.objects.create(
                    sip_call_id=sip_call_id,
                    number=number,
                    caller_num=caller_num,
                    deadline=_deadline(),
                )
        except IntegrityError:
            return None
        if ringing:
            events.send_to_user_on_commit(
                user_id=number.owner_id, event=incoming_call_event(call, number)
            )
    return call


def inbound_call_answered(*, call: InboundCall) -> None:
    call.answered_at = timezone.now()
    InboundCall.objects.filter(pk=call.pk).update(answered_at=call.answered_at)


def inbound_call_record(
    *,
    call: InboundCall,
    status: str,
    duration: int = 0,
    recording: str = "",
    recording_seconds: float | None = None,
) -> CallRecord | None:
    """Write the call's one history record (record_inbound_call) and close its ledger, in one
    transaction. None when it was recorded already (by recovery, after this agent was taken
    for dead) or its number was deleted meanwhile: then nothing is written. An answered call
    was answered by voicemail: the agent does not forward calls yet."""
    with transaction.atomic():
        if not InboundCall.objects.filter(pk=call.pk, recorded=False).update(recorded=True):
            return None
        try:
            return record_inbound_call(
                number=call.number,
                caller_num=call.caller_num,
                status=status,
                duration=duration,
                at=call.started_at,
                sip_call_id=call.sip_call_id,
                recording=recording,
                recording_seconds=recording_seconds,
                answered_by=AnsweredBy.VOICEMAIL if status == CallStatus.ANSWERED else None,
            )
        except NotFound:
            return None


def inbound_calls_extend(*, pks: list) -> None:
    """The heartbeat of the agent holding these calls: recovery leaves them alone."""
    InboundCall.objects.filter(pk__in=pks, recorded=False).update(deadline=_deadline())


def inbound_calls_recover() -> int:
    """Record the calls whose agent went silent (deadline passed, not recorded): `missed` if
    they were never answered, else `answered` up to the agent's last heartbeat (the message,
    if any, died with the agent). Safe beside other agents doing the same; returns how many
    this pass recorded."""
    now = timezone.now()
    grace = timedelta(seconds=settings.CALL_RECOVERY_GRACE)
    recorded = 0
    stale = InboundCall.objects.filter(recorded=False, deadline__lt=now).select_related("number")
    for call in stale[:100]:
        if call.answered_at is None:
            status, duration = CallStatus.MISSED, 0
        else:
            last_seen = call.deadline - grace
            status = CallStatus.ANSWERED
            duration = max(0, round((last_seen - call.answered_at).total_seconds()))
        if inbound_call_record(call=call, status=status, duration=duration) is not None:
            recorded += 1
    return recorded
