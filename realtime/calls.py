"""What a user does with outbound calls: submit one (idempotent per callId) and cancel it.

The WebSocket consumer, `POST /api/calls` and the admin all come through here. Reads are in
realtime.selectors, the state machine in realtime.pipeline, the queue in realtime.tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import quotas
from accounts.models import DialRefusal, User
from accounts.services import refusal_record
from core import dialing, ratelimit
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from core.fields import validated
from core.phone import e164_valid
from realtime import pipeline, selectors, tasks
from realtime.models import CallEvent, CallRequest, CallState
from realtime.providers import Step, get_provider
from realtime.serializers import CallSubmitInput
from virtual_numbers.models import Number

logger = logging.getLogger(__name__)


def _caller_id_for(*, user: User, from_number: str | None) -> tuple[Number | None, str]:
    numbers = Number.objects.filter(owner=user)
    if from_number is not None:
        e164 = e164_valid(from_number)
        number = numbers.filter(number=e164).first() if e164 else None
        if number is None:
            raise InvalidRequest(
                "from must be one of your numbers.", fields={"from": ["Not one of your numbers."]}
            )
        return number, number.number
    oldest = numbers.order_by("created_at", "id").first()
    if oldest is not None:
        return oldest, oldest.number
    return None, settings.SERVICE_CALLER_ID


def call_request_submit(
    *, user: User, data, also: Callable[[CallRequest], None] | None = None
) -> tuple[CallRequest, bool]:
    """Submit a call from a `call` frame, a POST /api/calls body or a Matrix `!call`; return
    (call, created).

    The call is persisted and its dispatch enqueued in one transaction (with `also(call)`, if
    given, in the same one): when this returns, the call is committed. The same callId again
    for the same user creates nothing and returns the existing call, whatever the rest of the
    body (created False). Otherwise `data` is checked by CallSubmitInput (InvalidRequest
    naming every bad field); RateLimited past RATE_LIMIT_CALLS_PER_USER new calls; `from`
    must be one of the user's numbers (default: their oldest, else the service's caller id).
    Then, under the user's row lock: the dialing policy (DestinationNotAllowed,
    core.dialing) and the plan's quotas (QuotaExceeded, accounts.quotas), counted exactly
    however many submits race. A refusal writes no call, and is counted for fraud review
    (accounts.services.refusal_record).
    """
    existing = selectors.call_find(
        user=user, call_id=data.get("callId") if isinstance(data, dict) else None
    )
    if existing is not None:
        return existing, False
    values = validated(CallSubmitInput, data)
    call_id, target, message = values["callId"], values["to"], values["message"]
    ratelimit.hit("calls:user", str(user.pk), settings.RATE_LIMIT_CALLS_PER_USER)
    number, caller_id = _caller_id_for(user=user, from_number=values.get("from"))
    try:
        with transaction.atomic():
            owner = quotas.user_lock(user.pk)  # fresh: staff may have just changed its limits
            existing = selectors.call_find(user=user, call_id=call_id)
            if existing is not None:  # committed by a concurrent submit while this one waited
                return existing, False
            dialing.destination_check(target, extra_countries=owner.extra_dial_countries)
            now = timezone.now()
            quotas.quota_check(user=owner, now=now)
            call = CallRequest.objects.create(
                owner=user,
                call_id=call_id,
                to=target,
                message=message,
                language=values.get("language") or settings.TTS_DEFAULT_LANGUAGE,
                status_callback=values.get("statusCallback", ""),
                from_number=number,
                caller_id=caller_id,
                created_at=now,
                updated_at=now,
                step_deadline=now + timedelta(seconds=settings.CALL_RECOVERY_GRACE),
            )
            CallEvent.objects.create(call=call, status=CallState.QUEUED, at=now)
            tasks.schedule_advance(call=call, expected_status=CallState.QUEUED)
            pipeline.push_status(call)
            if also is not None:
                also(call)
            # Last: the owner's counter row stays locked only until the commit.
            pipeline.call_counters_move(owner_id=user.pk, old=None, new=CallState.QUEUED)
    except dialing.DestinationNotAllowed as refused:
        refusal_record(user=user, kind=DialRefusal.Kind.DESTINATION, reason=refused.reason)
        raise
    except quotas.QuotaExceeded as refused:
        refusal_record(user=user, kind=DialRefusal.Kind.QUOTA, reason=refused.quota)
        raise
    except IntegrityError:
        # The same callId committed by a concurrent request a moment ago.
        return CallRequest.objects.get(owner=user, call_id=call_id), False
    return call, True


# --- cancel --------------------------------------------------------------------------------
def call_request_cancel(*, call: CallRequest) -> CallRequest:
    """Cancel a call that has not ended (one the caller reached through selectors.call_access):
    it ends `canceled` at once, and the provider hangs up what it placed (CANCEL while it
    rings, BYE once answered). `call_not_cancelable` once the call has ended."""
    step = Step(status=CallState.CANCELED, reason="canceled by the user")
    while not call.is_terminal:
        if pipeline.call_transition(call=call, step=step, expected_status=call.status):
            get_provider().hang_up(call)
            return call
        call.refresh_from_db()  # it moved on a moment ago: try again from where it is now
    raise ApplicationError(
        f"The call has already ended ({call.status}).", code=ErrorCode.CALL_NOT_CANCELABLE
    )
