"""The state machine of an outbound call: every state change, and asking the provider for the
next one. It knows nothing of queues: realtime.tasks schedules the steps.

It writes, yet it is not part of realtime.services: it is the layer under both services and
tasks. Submit and cancel (services), each step and recovery (tasks) and the telephony agent
all move calls through call_transition, and services schedule tasks; merged into services,
the state machine would make services and tasks import each other.

Every change is a conditional UPDATE (`WHERE status = <expected>`), persisted with its
CallEvent and pushed as `call_status` after commit, so a duplicate or late step changes
nothing and nothing is pushed about a row that was rolled back.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import quotas
from accounts.models import User
from calls.states import move_allowed
from core import events, metrics
from core.counters import counters_add
from core.fields import represent, to_ms
from realtime.models import (
    TERMINAL_STATES,
    CallEvent,
    CallRequest,
    CallRequestCounter,
    CallState,
)
from realtime.providers import Step, get_provider
from realtime.serializers import CallAckOutput, CallStatusOutput

logger = logging.getLogger(__name__)

STATE_TIMESTAMP = {
    CallState.DIALING: "dialing_at",
    CallState.RINGING: "ringing_at",
    CallState.IN_PROGRESS: "answered_at",
}


def call_recovery_deadline(*, now: datetime | None = None, wait: float = 0) -> datetime:
    """When recovery may take over a call last heard of at `now` (default: the present) whose
    next step is due `wait` seconds later: CALL_RECOVERY_GRACE after that. The one place the
    grace is added: the submit, each transition, recovery's retries, and the telephony
    agent's heartbeats (its outbound calls and its inbound ledger) all set deadlines here."""
    return (now or timezone.now()) + timedelta(seconds=wait + settings.CALL_RECOVERY_GRACE)


def call_recovery_last_seen(deadline: datetime) -> datetime:
    """When a deadline set by call_recovery_deadline (no wait) was set: the moment its
    holder was last heard of."""
    return deadline - timedelta(seconds=settings.CALL_RECOVERY_GRACE)


def call_heartbeat_interval() -> float:
    """How often a holder of calls pushes their deadlines forward (call_recovery_deadline):
    three times within the grace, so a late beat costs nothing, and every 0.5 to 5 s."""
    return max(0.5, min(5.0, settings.CALL_RECOVERY_GRACE / 3))


def call_status_event(call: CallRequest) -> dict:
    """The `call_status` frame for the call's current state."""
    return represent(CallStatusOutput, call)


def call_ack_event(call: CallRequest) -> dict:
    """The `call_ack` frame (and the body of `POST /api/calls`): the call as it was stored."""
    return represent(CallAckOutput, call)


def push_status(call: CallRequest) -> None:
    events.send_to_user_on_commit(
        user_id=call.owner_id, event=call_status_event(call), row=call, extra=_order(call)
    )


def _order(call: CallRequest) -> dict:
    """Beside a call_status frame, for the sockets' order of its states (realtime.ordering):
    when the call was created."""
    return {"callCreated": to_ms(call.created_at)}


def call_reported_event(call: CallRequest, report: dict) -> dict:
    """The `call_status` frame of something a verb of the call's script reported (`report`:
    voiceapps.program's event, such as {"event": "gathered", "verb": "gather", "result":
    {...}}): the call's state, with the report beside it."""
    return {**call_status_event(call), **report}


def calls_reported(*, call: CallRequest, reports: list[dict], now=None) -> None:
    """Record what the verbs of the call's script reported (voiceapps.program), each as a row
    of its timeline at the call's current status, and push each as a `call_status` frame (to
    sockets, webhooks and the statusCallback), in the caller's transaction. What a report
    holds (the digits pressed) goes to the owner only, never to a log."""
    now = now or timezone.now()
    for report in reports:
        detail = str(report.get("detail", ""))[:200]
        data = {key: value for key, value in report.items() if key not in ("event", "detail")}
        CallEvent.objects.create(
            call=call, status=call.status, at=now, event=report["event"], detail=detail, data=data
        )
        events.send_to_user_on_commit(
            user_id=call.owner_id,
            event=call_reported_event(call, report),
            row=call,
            extra=_order(call),
        )


def push_statuses(calls: list[CallRequest], *, into: list, owned=None) -> None:
    """push_status for the calls of one write at once, each call's push collected into its
    own list of `into` (core.events.collected_into; None: pushed as usual), with what the
    caller read of their owners for the outbox writers (`owned`, core.events)."""
    events.send_to_users_on_commit(
        [
            (call.owner_id, call_status_event(call), pushes, call)
            for call, pushes in zip(calls, into, strict=True)
        ],
        owned=owned,
        extras=[_order(call) for call in calls],
    )


def call_transition(*, call: CallRequest, step: Step, expected_status: str) -> bool:
    """Move `call` from `expected_status` to `step.status`, persist and push it.

    A conditional UPDATE: if the call is no longer in `expected_status` (canceled, or a
    duplicate step already moved it) nothing happens and False is returned. A non-terminal
    state gets a deadline of `step.wait` plus the recovery grace: past it, recovery drives the
    call again. The owner's status counters move in the same transaction. Scheduling the
    next step is the caller's (realtime.tasks), in the same transaction.

    A move the ledger's table refuses (calls.states.MOVES: backward, out of an ended state,
    to the state it is in) is logged with the call's id and the two states, and changes
    nothing: False, as for a call that moved on.
    """
    if not move_allowed(expected_status, step.status):
        logger.warning(
            "call %s: the move from %s to %s is refused by the state table",
            call.pk,
            expected_status,
            step.status,
        )
        return False
    now = timezone.now()
    terminal = step.status in TERMINAL_STATES
    fields: dict = {"status": step.status, "updated_at": now}
    if terminal:
        fields["ended_at"] = now
        fields["step_deadline"] = None
    else:
        fields["step_deadline"] = call_recovery_deadline(now=now, wait=step.wait)
    if step.status in STATE_TIMESTAMP:
        fields[STATE_TIMESTAMP[step.status]] = now
    if step.duration is not None:
        fields["duration"] = step.duration
    if step.reason:
        fields["failure_reason"] = step.reason[:200]
    if step.provider_call_id:
        fields["provider_call_id"] = step.provider_call_id
    with transaction.atomic():
        if step.status == CallState.IN_PROGRESS:
            # Answered: granted its talk out of the day's answered seconds, under the owner's
            # lock, which submits take too (accounts.quotas).
            try:
                owner = quotas.user_lock(call.owner_id)
            except User.DoesNotExist:
                return False  # the owner deleted their account: the call went with it
            fields["talk_limit"] = quotas.talk_grant(
                user=owner, call_pk=call.pk, planned=step.talk, now=now
            )
        moved = CallRequest.objects.filter(pk=call.pk, status=expected_status).update(**fields)
        if not moved:
            return False
        # What the script's verbs reported on the way (a provider that runs the whole script
        # at once, the simulation), at the state they happened in, before the one they led to.
        calls_reported(call=call, reports=step.extra.get("reports", []), now=now)
        for name, value in fields.items():
            setattr(call, name, value)
        CallEvent.objects.create(call=call, status=step.status, at=now, detail=step.reason[:200])
        call_counters_move(owner_id=call.owner_id, old=expected_status, new=step.status)
        push_status(call)
        if terminal:
            metrics.count_on_commit(metrics.calls_ended, step.status)
    return True


def call_counters_move(*, owner_id, old: str | None, new: str) -> None:
    """Move one call of the owner from status `old` (None: a new call) to `new` in the
    counters behind `total` of the call list, inside the caller's transaction: the only
    writes of CallRequest.status are submit (through calls_counted) and call_transition."""
    moves = [({"owner_id": owner_id, "status": new}, 1)]
    if old is not None:
        moves.append(({"owner_id": owner_id, "status": old}, -1))
    counters_add(CallRequestCounter, moves)


def calls_counted(new_calls: dict) -> None:
    """Count new calls (`new_calls`: how many per owner pk) as queued, in the caller's
    transaction, as call_counters_move does for one."""
    counters_add(
        CallRequestCounter,
        [({"owner_id": owner, "status": CallState.QUEUED}, n) for owner, n in new_calls.items()],
    )


def call_next_step(*, call_request_id: str, expected_status: str) -> tuple[CallRequest, Step]:
    """The call and the provider's next step for it, or None when there is nothing to do (the
    call has left `expected_status`, has ended, or the provider has no step yet).

    Asks the provider outside any transaction: a real provider may take its time. A provider
    that fails ends the call `failed`: a call must never hang on a provider's bug.
    """
    call = CallRequest.objects.filter(pk=call_request_id).first()
    if call is None or call.status != expected_status or call.is_terminal:
        return None
    provider = get_provider()
    try:
        step = provider.place(call) if call.status == CallState.QUEUED else provider.advance(call)
    except Exception as exc:
        logger.exception("provider failed on call %s", call.pk)
        step = Step(status=CallState.FAILED, reason=f"provider error: {type(exc).__name__}")
    return None if step is None else (call, step)
