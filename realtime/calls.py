"""What a user does with outbound calls: submit one (idempotent per callId) and cancel it.

The WebSocket consumer, `POST /api/calls` and the admin all come through here. Reads are in
realtime.selectors, the state machine in realtime.pipeline, the queue in realtime.tasks.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import User
from core import parsing, ratelimit
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from core.phone import e164_valid
from realtime import pipeline, tasks
from realtime.models import CallEvent, CallRequest, CallState
from realtime.providers import Step
from virtual_numbers.models import Number

logger = logging.getLogger(__name__)

CALL_ID_MAX = 64
MESSAGE_MAX = 1000


# --- submit ----------------------------------------------------------------------------------
def _text(value, *, field: str, maximum: int, rule=parsing.text_problem) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be a string.", fields={field: ["Must be a string."]})
    if not value.strip() or len(value) > maximum:
        raise InvalidRequest(
            f"{field} must be 1 to {maximum} characters.",
            fields={field: [f"Must be 1 to {maximum} characters."]},
        )
    problem = rule(value)
    if problem:
        raise InvalidRequest(f"{field}: {problem}", fields={field: [problem]})
    return value


def _validate_call(*, call_id, to, message) -> tuple[str, str, str]:
    errors: dict[str, list[str]] = {}
    checks = (
        (
            "callId",
            lambda: _text(call_id, field="callId", maximum=CALL_ID_MAX, rule=parsing.id_problem),
        ),
        ("message", lambda: _text(message, field="message", maximum=MESSAGE_MAX)),
    )
    for _name, check in checks:
        try:
            check()
        except InvalidRequest as exc:
            errors.update(exc.fields or {})
    target = e164_valid(to)
    if target is None:
        errors["to"] = ["Must be a valid phone number in E.164 form, like +442079460123."]
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidRequest(f"{field}: {messages[0]}", fields=errors)
    return call_id, target, message


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
    *, user: User, call_id, to, message, from_number: str | None = None
) -> tuple[CallRequest, bool]:
    """Persist a call and enqueue its dispatch in one transaction; return (call, created).

    The same callId again for the same user creates nothing and returns the existing call,
    whatever its body (created False). Checks callId (1-64 chars), `to` (valid E.164),
    message (1-1000 chars) and `from` (one of the user's numbers; default their oldest, else
    the service's caller id); raises InvalidRequest naming every bad field, RateLimited past
    RATE_LIMIT_CALLS_PER_USER new calls. When this returns, the call is committed.
    """
    if isinstance(call_id, str) and parsing.id_problem(call_id) is None:
        existing = CallRequest.objects.filter(owner=user, call_id=call_id).first()
        if existing is not None:
            return existing, False
    call_id, target, message = _validate_call(call_id=call_id, to=to, message=message)
    if from_number is not None and not isinstance(from_number, str):
        raise InvalidRequest("from must be a string.", fields={"from": ["Must be a string."]})
    ratelimit.hit("calls:user", str(user.pk), settings.RATE_LIMIT_CALLS_PER_USER)
    number, caller_id = _caller_id_for(user=user, from_number=from_number)
    now = timezone.now()
    try:
        with transaction.atomic():
            call = CallRequest.objects.create(
                owner=user,
                call_id=call_id,
                to=target,
                message=message,
                from_number=number,
                caller_id=caller_id,
                created_at=now,
                updated_at=now,
                step_deadline=now + timedelta(seconds=settings.CALL_RECOVERY_GRACE),
            )
            CallEvent.objects.create(call=call, status=CallState.QUEUED, at=now)
            tasks.schedule_advance(call=call, expected_status=CallState.QUEUED)
            pipeline.push_status(call)
    except IntegrityError:
        # The same callId committed by a concurrent request a moment ago.
        return CallRequest.objects.get(owner=user, call_id=call_id), False
    return call, True


# --- cancel --------------------------------------------------------------------------------
def call_request_cancel(*, call: CallRequest) -> CallRequest:
    """Cancel a queued call (one the caller reached through selectors.call_access);
    `call_not_cancelable` once it has moved on."""
    step = Step(status=CallState.CANCELED, reason="canceled by the user")
    if not pipeline.call_transition(call=call, step=step, expected_status=CallState.QUEUED):
        call.refresh_from_db()
        raise ApplicationError(
            f"Only a queued call can be canceled; this one is {call.status}.",
            code=ErrorCode.CALL_NOT_CANCELABLE,
        )
    return call
