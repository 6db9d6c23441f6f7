"""The realtime module that knows django-tasks: each step of a call is a task, scheduled with
run_after, so one worker drives many calls and a worker that dies loses nothing scheduled.

A step that was running when its worker died leaves the call past its deadline with no task
waiting: `calls_recover` (the worker runs it every CALL_RECOVERY_INTERVAL) drives it again,
and ends it `failed` after CALL_MAX_RECOVERIES tries.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from calls.models import Call, Direction
from calls.states import ACTIVE_STATES, TERMINAL_STATES, CallState
from core import taskqueue
from realtime import pipeline
from realtime.providers import Step, quota_cut

logger = logging.getLogger(__name__)


@task()
def advance_call(call_request_id: str, expected_status: str) -> None:
    """Take one step of an outbound call. Idempotent: a step for a state the call has
    already left does nothing."""
    found = pipeline.call_next_step(
        call_request_id=call_request_id, expected_status=expected_status
    )
    if found is not None:
        call, step = found
        call_step_apply(call=call, step=step, expected_status=expected_status)


def schedule_advance(*, call: Call, expected_status: str, after: float = 0) -> None:
    """Enqueue the call's next step, due `after` seconds from now, in the caller's transaction
    (so the step exists if and only if the state it follows was committed)."""
    due = (
        advance_call
        if not after
        else advance_call.using(run_after=timezone.now() + timedelta(seconds=after))
    )
    taskqueue.enqueue(due, call_request_id=str(call.pk), expected_status=expected_status)


def call_step_apply(*, call: Call, step: Step, expected_status: str) -> bool:
    """Persist `step` and, unless it ended the call, schedule the next one: together or not
    at all. Also how a provider that learns of progress on its own reports it."""
    with transaction.atomic():
        moved = pipeline.call_transition(call=call, step=step, expected_status=expected_status)
        if moved and step.status not in TERMINAL_STATES:
            wait = step.wait
            if step.talk and quota_cut(call, step.talk):
                wait *= call.talk_limit / step.talk  # the talk ends early, at its grant
            schedule_advance(call=call, expected_status=step.status, after=wait)
    return moved


def _has_ready_step(call: Call) -> bool:
    """Whether a step of `call` is queued and not yet taken (the call is only behind a
    backlog, not abandoned)."""
    return DBTaskResult.objects.filter(
        status=TaskResultStatus.READY,
        task_path=advance_call.module_path,
        args_kwargs__kwargs__call_request_id=str(call.pk),
    ).exists()


def calls_recover(*, now=None) -> int:
    """Drive again every active call whose step is overdue and has no task waiting for it
    (its worker died mid-step). After CALL_MAX_RECOVERIES tries the call ends `failed`.
    Returns how many calls were touched."""
    now = now or timezone.now()
    deadline = pipeline.call_recovery_deadline(now=now)
    # An inbound call's recovery is its agents' (telephony.services.inbound_calls_recover).
    overdue = Call.objects.filter(
        direction=Direction.OUTBOUND, status__in=ACTIVE_STATES, step_deadline__lt=now
    )
    touched = 0
    for call in overdue.order_by("step_deadline")[:500]:
        if _has_ready_step(call):  # only waiting behind a backlog: give it more time
            Call.objects.filter(pk=call.pk, status=call.status).update(step_deadline=deadline)
            continue
        touched += 1
        if call.recoveries >= settings.CALL_MAX_RECOVERIES:
            pipeline.call_transition(
                call=call,
                step=Step(status=CallState.FAILED, reason="interrupted: no worker completed it"),
                expected_status=call.status,
            )
            continue
        with transaction.atomic():
            updated = Call.objects.filter(pk=call.pk, status=call.status).update(
                recoveries=call.recoveries + 1, step_deadline=deadline
            )
            if updated:
                schedule_advance(call=call, expected_status=call.status)
        logger.warning("recovered call %s stuck in %s", call.pk, call.status)
    return touched
