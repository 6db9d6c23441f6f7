"""Outbound calls: submit (idempotent per callId), drive through the provider, cancel, recover.

Every state change is a conditional UPDATE (`WHERE status = <expected>`), persisted with its
CallEvent and pushed as `call_status` after commit. Each next step is its own task, scheduled
with run_after, so one worker drives many calls at once and a worker that dies loses nothing
that was scheduled; a step that was running when it died is found by `calls_recover`.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import User
from core import events, parsing, ratelimit
from core.errors import Conflict, InvalidRequest, NotFound
from core.fields import to_ms
from core.phone import e164_valid
from realtime.models import ACTIVE_STATES, TERMINAL_STATES, CallEvent, CallRequest, CallState
from realtime.providers import Step, get_provider
from virtual_numbers.models import Number

logger = logging.getLogger(__name__)

CALL_ID_MAX = 64
MESSAGE_MAX = 1000
STATE_TIMESTAMP = {
    CallState.DIALING: "dialing_at",
    CallState.RINGING: "ringing_at",
    CallState.IN_PROGRESS: "answered_at",
}


def call_status_event(call: CallRequest) -> dict:
    """The `call_status` frame for the call's current state."""
    event = {
        "type": "call_status",
        "callId": call.call_id,
        "status": call.status,
        "ts": to_ms(call.updated_at),
    }
    if call.duration is not None:
        event["duration"] = call.duration
    if call.failure_reason:
        event["reason"] = call.failure_reason
    return event


def _push_status(call: CallRequest) -> None:
    events.send_to_user_on_commit(user_id=call.owner_id, event=call_status_event(call))


# --- submit --------------------------------------------------------------------------------
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
    from realtime.tasks import advance_call

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
            advance_call.enqueue(call_request_id=str(call.pk), expected_status=CallState.QUEUED)
            _push_status(call)
    except IntegrityError:
        # The same callId committed by a concurrent request a moment ago.
        return CallRequest.objects.get(owner=user, call_id=call_id), False
    return call, True


# --- the pipeline ---------------------------------------------------------------------------
def call_transition(*, call: CallRequest, step: Step, expected_status: str) -> bool:
    """Move `call` from `expected_status` to `step.status`, persist and push it.

    A conditional UPDATE: if the call is no longer in `expected_status` (canceled, or a
    duplicate step already moved it) nothing happens and False is returned. A non-terminal
    step schedules the next advance after `step.wait` seconds.
    """
    from realtime.tasks import advance_call

    now = timezone.now()
    terminal = step.status in TERMINAL_STATES
    fields: dict = {"status": step.status, "updated_at": now}
    if terminal:
        fields["ended_at"] = now
        fields["step_deadline"] = None
    else:
        grace = settings.CALL_RECOVERY_GRACE
        fields["step_deadline"] = now + timedelta(seconds=step.wait + grace)
    if step.status in STATE_TIMESTAMP:
        fields[STATE_TIMESTAMP[step.status]] = now
    if step.duration is not None:
        fields["duration"] = step.duration
    if step.reason:
        fields["failure_reason"] = step.reason[:200]
    if step.provider_call_id:
        fields["provider_call_id"] = step.provider_call_id
    with transaction.atomic():
        moved = CallRequest.objects.filter(pk=call.pk, status=expected_status).update(**fields)
        if not moved:
            return False
        for name, value in fields.items():
            setattr(call, name, value)
        CallEvent.objects.create(call=call, status=step.status, at=now, detail=step.reason[:200])
        if not terminal:
            advance_call.using(run_after=now + timedelta(seconds=step.wait)).enqueue(
                call_request_id=str(call.pk), expected_status=step.status
            )
        _push_status(call)
    return True


def call_advance(*, call_request_id: str, expected_status: str) -> None:
    """One step of a call (the body of the advance_call task). Idempotent: a step for a state
    the call has already left does nothing."""
    call = CallRequest.objects.filter(pk=call_request_id).first()
    if call is None or call.status != expected_status or call.is_terminal:
        return
    provider = get_provider()
    try:
        step = provider.start(call) if call.status == CallState.QUEUED else provider.advance(call)
    except Exception as exc:  # a provider failure ends the call; it must not hang
        logger.exception("provider failed on call %s", call.pk)
        step = Step(status=CallState.FAILED, reason=f"provider error: {type(exc).__name__}")
    if step is not None:
        call_transition(call=call, step=step, expected_status=expected_status)


def call_request_cancel(*, user: User, call_id: str) -> CallRequest:
    """Cancel a queued call of the user; Conflict `call_not_cancelable` once it has moved on."""
    call = call_request_get(user=user, call_id=call_id)
    step = Step(status=CallState.CANCELED, reason="canceled by the user")
    if not call_transition(call=call, step=step, expected_status=CallState.QUEUED):
        call.refresh_from_db()
        raise Conflict(
            f"Only a queued call can be canceled; this one is {call.status}.",
            code="call_not_cancelable",
        )
    return call


def call_request_get(*, user: User, call_id: str) -> CallRequest:
    """The caller's call by its callId; NotFound for one that is unknown, not theirs, or that
    no call can have (control characters are refused when calls are submitted)."""
    if parsing.id_problem(call_id):
        raise NotFound()
    call = CallRequest.objects.filter(owner=user, call_id=call_id).first()
    if call is None:
        raise NotFound()
    return call


def _has_ready_step(call: CallRequest) -> bool:
    from django_tasks.base import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from realtime.tasks import advance_call

    return DBTaskResult.objects.filter(
        status=TaskResultStatus.READY,
        task_path=advance_call.module_path,
        args_kwargs__kwargs__call_request_id=str(call.pk),
    ).exists()


def calls_recover(*, now=None) -> int:
    """Drive again every active call whose step is overdue and has no task waiting for it
    (its worker died mid-step). After CALL_MAX_RECOVERIES tries the call ends `failed`.
    Returns how many calls were touched."""
    from realtime.tasks import advance_call

    now = now or timezone.now()
    grace = timedelta(seconds=settings.CALL_RECOVERY_GRACE)
    overdue = CallRequest.objects.filter(status__in=ACTIVE_STATES, step_deadline__lt=now)
    touched = 0
    for call in overdue.order_by("step_deadline")[:500]:
        if _has_ready_step(call):  # only waiting behind a backlog: give it more time
            CallRequest.objects.filter(pk=call.pk, status=call.status).update(
                step_deadline=now + grace
            )
            continue
        touched += 1
        if call.recoveries >= settings.CALL_MAX_RECOVERIES:
            call_transition(
                call=call,
                step=Step(status=CallState.FAILED, reason="interrupted: no worker completed it"),
                expected_status=call.status,
            )
            continue
        with transaction.atomic():
            updated = CallRequest.objects.filter(pk=call.pk, status=call.status).update(
                recoveries=call.recoveries + 1, step_deadline=now + grace
            )
            if updated:
                advance_call.enqueue(call_request_id=str(call.pk), expected_status=call.status)
        logger.warning("recovered call %s stuck in %s", call.pk, call.status)
    return touched
