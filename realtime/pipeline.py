"""The state machine of an outbound call: every state change, and asking the provider for the
next one. It knows nothing of queues: realtime.tasks schedules the steps.

It writes, yet it is not part of realtime.services: it is the layer under both services and
tasks. Submit and cancel (services), each step and recovery (tasks) and the telephony agent
all move calls through call_transition, and services schedule tasks; merged into services,
the state machine would make services and tasks import each other.

Every change is a conditional UPDATE (`WHERE status = <expected>`) of the call ledger
(calls.services), persisted with its numbered event and pushed as `call_status` after commit
(with that number, `seq`), so a duplicate or late step changes nothing and nothing is pushed
about a row that was rolled back.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import quotas
from accounts.models import User
from calls import services as ledger
from calls.models import Call, Recording, TranscriptStatus
from calls.states import TERMINAL_STATES, CallState
from core import events, metrics
from core.fields import represent
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


def call_status_event(call: Call) -> dict:
    """The `call_status` frame for the call's current state, with its newest event's number
    (`seq`: the call's `last_seq`)."""
    return represent(CallStatusOutput, call)


def call_ack_event(call: Call) -> dict:
    """The `call_ack` frame (and the body of `POST /api/calls`): the call as it was stored."""
    return represent(CallAckOutput, call)


def push_status(call: Call) -> None:
    events.send_to_user_on_commit(user_id=call.owner_id, event=call_status_event(call), row=call)


def _push_reports(call: Call, frame: dict, reports: list[dict], seqs: list[int]) -> None:
    """Push what a verb of the call's script reported (each of `reports`: voiceapps.program's
    event, such as {"event": "gathered", "verb": "gather", "result": {...}}) as a
    `call_status` frame of its own event number: `frame`, the call's state it happened in,
    with the report beside it."""
    for report, seq in zip(reports, seqs, strict=False):
        events.send_to_user_on_commit(
            user_id=call.owner_id, event={**frame, "seq": seq, **report}, row=call
        )


def calls_reported(*, call: Call, reports: list[dict], now=None) -> None:
    """Record what the verbs of the call's script reported (voiceapps.program), each an event
    of the call at its current status (calls.services), and push each as a `call_status`
    frame (to sockets, webhooks and the statusCallback), in the caller's transaction. What a
    report holds (the digits pressed) goes to the owner only, never to a log."""
    now = now or timezone.now()
    with transaction.atomic():
        seqs = ledger.call_reports_add(
            call=call, reports=[ledger.Report.of(report) for report in reports], at=now
        )
        _push_reports(call, call_status_event(call), reports, seqs or [])


# What machine detection heard (telephony.machine_detection's reasons), in words.
HEARD = {
    "beep": "a beep",
    "greeting": "a greeting longer than a person's answer",
    "short_answer": "a short answer, then silence",
    "cng": "a fax's calling tone",
    "ced": "a fax's answer tone",
    "timeout": "nothing it could tell apart in 4 s",
    "no_audio": "too little audio in 4 s",
}


def call_answered_as(*, call: Call, answered_by: str, heard: str, now=None) -> None:
    """What machine detection decided answered the call (human, machine, fax, unknown): kept
    on the call (its `answeredBy` from now on, in every frame, GET /api/calls and webhooks),
    and reported as a `detected` event at the call's state, pushed as its own `call_status`
    frame, in one transaction."""
    with transaction.atomic():
        Call.objects.filter(pk=call.pk).update(answered_as=answered_by)
        call.answered_as = answered_by
        report = {"event": "detected", "answeredBy": answered_by, "detail": HEARD.get(heard, heard)}
        calls_reported(call=call, reports=[report], now=now)


def recording_transcribed(*, recording: Recording) -> None:
    """A `record` verb's recording, transcribed (history.tasks, by TRANSCRIPT_ANNOUNCED): a
    `transcribed` event of its call, pushed as a `call_status` frame of its own number (to
    sockets, webhooks and the statusCallback), in the caller's transaction. The words go to
    the call's owner only, never to a log."""
    call = Call.objects.filter(pk=recording.call_id).first()
    if call is None:
        return
    done = recording.transcript_status == TranscriptStatus.DONE
    result = {
        "recordingId": str(recording.pk),
        "transcriptStatus": recording.transcript_status,
        "transcript": recording.transcript if done else "",
        "transcriptConfidence": recording.transcript_confidence if done else None,
    }
    report = {"event": "transcribed", "verb": "record", "result": result}
    calls_reported(call=call, reports=[report])


def push_statuses(calls: list[Call], *, into: list, owned=None) -> None:
    """push_status for the calls of one write at once, each call's push collected into its
    own list of `into` (core.events.collected_into; None: pushed as usual), with what the
    caller read of their owners for the outbox writers (`owned`, core.events)."""
    events.send_to_users_on_commit(
        [
            (call.owner_id, call_status_event(call), pushes, call)
            for call, pushes in zip(calls, into, strict=True)
        ],
        owned=owned,
    )


def call_transition(*, call: Call, step: Step, expected_status: str) -> bool:
    """Move `call` from `expected_status` to `step.status`, persist and push it.

    A conditional UPDATE (calls.services.call_move): if the call is no longer in
    `expected_status` (canceled, or a duplicate step already moved it) nothing happens and
    False is returned. A non-terminal state gets a deadline of `step.wait` plus the recovery
    grace: past it, recovery drives the call again. The owner's status counters move in the
    same transaction. Scheduling the next step is the caller's (realtime.tasks), in the same
    transaction.

    A move the ledger's table refuses (calls.states.MOVES: backward, out of an ended state,
    to the state it is in) is logged with the call's id and the two states, and changes
    nothing: False, as for a call that moved on.
    """
    if ledger.move_refused(call_pk=call.pk, old=expected_status, new=step.status):
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
    if step.sip_call_id:
        fields["sip_call_id"] = step.sip_call_id
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
        # Who answered, when the provider tells it with the step (the simulation's callee):
        # on the reports' frames and the move's.
        if answered_as := step.extra.get("answered_as"):
            fields["answered_as"] = call.answered_as = answered_as
        # What the script's verbs reported on the way (a provider that runs the whole script
        # at once, the simulation), at the state they happened in, before the one they led to.
        reports = step.extra.get("reports", [])
        before = call_status_event(call) if reports else {}
        seqs = ledger.call_move(
            call=call,
            expected=expected_status,
            values=fields,
            at=now,
            reason=step.reason,
            reports=[ledger.Report.of(report) for report in reports],
        )
        if seqs is None:
            return False
        _push_reports(call, before, reports, seqs)
        push_status(call)
        if terminal:
            metrics.count_on_commit(metrics.calls_ended, step.status)
    return True


def call_next_step(*, call_request_id: str, expected_status: str) -> tuple[Call, Step]:
    """The call and the provider's next step for it, or None when there is nothing to do (the
    call has left `expected_status`, has ended, or the provider has no step yet).

    Asks the provider outside any transaction: a real provider may take its time. A provider
    that fails ends the call `failed`: a call must never hang on a provider's bug.
    """
    call = Call.objects.filter(pk=call_request_id).first()
    if call is None or call.status != expected_status or call.is_terminal:
        return None
    provider = get_provider()
    try:
        step = provider.place(call) if call.status == CallState.QUEUED else provider.advance(call)
    except Exception as exc:
        logger.exception("provider failed on call %s", call.pk)
        step = Step(status=CallState.FAILED, reason=f"provider error: {type(exc).__name__}")
    return None if step is None else (call, step)
