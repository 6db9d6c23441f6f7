"""Every write of a call's state and events: the one place a call moves (calls.states.MOVES)
and the one place its events are numbered.

A move is one conditional UPDATE (`WHERE status = <expected>`) that also adds to the call's
`last_seq` the number of events it brings, `RETURNING` the new `last_seq`: the events' numbers
are assigned in the statement that moves the state, so two writers of one call can never give
two events one number, and a move that lost its race numbers nothing. The events follow in the
same transaction (the caller's), and the owner's status counters move with them.

Who decides a move (a provider's step, a cancel, recovery, the telephony agent) and what is
pushed about it is realtime.pipeline's; this module only keeps the ledger consistent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connections, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.db.models.sql import UpdateQuery

from calls.models import (
    AnsweredBy,
    Call,
    CallCounter,
    CallEvent,
    Direction,
    Leg,
    LegKind,
    LegRole,
    Outcome,
    OutcomeCounter,
    Recording,
)
from calls.states import TERMINAL_STATES, CallState, LegState, leg_move_allowed, move_allowed
from core.counters import counters_add
from core.db import create_unless_taken

logger = logging.getLogger(__name__)


@dataclass
class Report:
    """Something a verb of the call's script reported (voiceapps.program): `kind` (gathered,
    recorded, dialed, hook_failed, limit), a `detail`, and the rest of what it said."""

    kind: str
    detail: str = ""
    data: dict = field(default_factory=dict)

    def event(self, *, call: Call, seq: int, status: str, at: datetime) -> CallEvent:
        """This report as the call's event number `seq`, at the call's state `status`."""
        return CallEvent(
            call=call,
            seq=seq,
            status=status,
            at=at,
            kind=self.kind,
            detail=self.detail,
            data=self.data,
        )

    @classmethod
    def of(cls, report: dict) -> Report:
        data = {key: value for key, value in report.items() if key not in ("event", "detail")}
        return cls(kind=report["event"], detail=str(report.get("detail", ""))[:200], data=data)


def move_refused(*, call_pk, old: str, new: str) -> bool:
    """Whether the state table refuses moving call `call_pk` from `old` to `new`; a refusal is
    logged with the call's id and both states (never raised: a refused move changes nothing)."""
    return _refused(move_allowed(old, new), f"call {call_pk}", old, new)


def _refused(allowed: bool, what: str, old: str | None, new: str) -> bool:
    """Not `allowed`, and if so logged: `what` (the call or leg, by id) and both states."""
    if not allowed:
        logger.warning("%s: the move from %s to %s is refused by the state table", what, old, new)
    return not allowed


def _update_returning_seq(*, pk, expected: str | None, values: dict, added: int) -> int | None:
    """UPDATE the call `pk` (still in `expected`, unless None) with `values` and `added` more
    events, in one statement; the call's new `last_seq`, or None when no row matched."""
    rows = Call.objects.filter(pk=pk)
    if expected is not None:
        rows = rows.filter(status=expected)
    query = rows.query.chain(UpdateQuery)
    query.add_update_values({**values, "last_seq": F("last_seq") + added})
    sql, params = query.get_compiler(rows.db).as_sql()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(f'{sql} RETURNING "last_seq"', params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def call_move(
    *, call: Call, expected: str, values: dict, at: datetime, reason: str = "", reports=()
) -> list[int] | None:
    """Move `call` from `expected` to `values["status"]` with the rest of `values`, inside the
    caller's transaction: what its script's verbs reported on the way (`reports`, Report) at
    the state it was in, then the move itself, each an event with its number. The numbers of
    the events written, the move's last, or None when the table refuses the move (logged) or
    the call is no longer in `expected` (it moved on, or a duplicate step). `call` is updated
    in place."""
    new = values["status"]
    if move_refused(call_pk=call.pk, old=expected, new=new):
        return None
    reports = list(reports)
    last = _update_returning_seq(
        pk=call.pk, expected=expected, values=values, added=len(reports) + 1
    )
    if last is None:
        return None
    seqs = list(range(last - len(reports), last + 1))
    events = [
        r.event(call=call, seq=seq, status=expected, at=at)
        for seq, r in zip(seqs, reports, strict=False)
    ]
    events.append(CallEvent(call=call, seq=last, status=new, at=at, detail=reason[:200]))
    CallEvent.objects.bulk_create(events)
    for name, value in values.items():
        setattr(call, name, value)
    call.last_seq = last
    if call.direction == Direction.OUTBOUND:  # the call list's total counts outbound calls
        call_counters_move(owner_id=call.owner_id, old=expected, new=new)
    return seqs


def call_reports_add(*, call: Call, reports, at: datetime) -> list[int] | None:
    """What the verbs of the call's script reported (Report), each an event at the call's
    current state, numbered after its last, inside the caller's transaction. Their numbers, or
    None for a call that is gone."""
    reports = list(reports)
    if not reports:
        return []
    last = _update_returning_seq(pk=call.pk, expected=None, values={}, added=len(reports))
    if last is None:
        return None
    seqs = list(range(last - len(reports) + 1, last + 1))
    CallEvent.objects.bulk_create(
        r.event(call=call, seq=seq, status=call.status, at=at)
        for seq, r in zip(seqs, reports, strict=True)
    )
    call.last_seq = last
    return seqs


def calls_created(calls: list[Call], *, at: datetime) -> None:
    """New calls, just inserted (each `queued` with `last_seq` 1): their first event, inside
    the caller's transaction. Their counts are calls_counted's, last in that transaction."""
    CallEvent.objects.bulk_create(
        [CallEvent(call=call, seq=1, status=CallState.QUEUED, at=at) for call in calls]
    )


def calls_counted(new_calls: dict) -> None:
    """Count new calls (`new_calls`: how many per owner pk) as queued, in the caller's
    transaction; last in it, so the owners' counter rows stay locked only until the commit."""
    counters_add(
        CallCounter,
        [({"owner_id": owner, "status": CallState.QUEUED}, n) for owner, n in new_calls.items()],
    )


def call_counters_move(*, owner_id, old: str | None, new: str) -> None:
    """Move one call of the owner from status `old` (None: a new call) to `new` in the
    counters behind `total` of the call list, inside the caller's transaction."""
    moves = [({"owner_id": owner_id, "status": new}, 1)]
    if old is not None:
        moves.append(({"owner_id": owner_id, "status": old}, -1))
    counters_add(CallCounter, moves)


# --- inbound calls -------------------------------------------------------------------------
def _inbound(*, number, caller_id: str, sip_call_id: str, at: datetime) -> dict:
    """The fields every inbound call starts with: to `number`, from `caller_id`, at `at`."""
    return {
        "direction": Direction.INBOUND,
        "owner_id": number.owner_id,
        "number": number,
        "to": number.number,
        "caller_id": caller_id,
        "message": "",
        "sip_call_id": sip_call_id,
        "created_at": at,
        "updated_at": at,
        "ringing_at": at,
    }


def inbound_call_open(*, sip_call_id: str, number, caller_id: str, at: datetime, deadline):
    """A new inbound call to `number` from `caller_id`, ringing, with its first event (seq 1),
    held by its agent until `deadline` (the heartbeat moves it on); None when an inbound call
    of this SIP Call-ID exists (a re-sent INVITE): nothing is written then."""
    with transaction.atomic():
        call = create_unless_taken(
            Call.objects.create,
            **_inbound(number=number, caller_id=caller_id, sip_call_id=sip_call_id, at=at),
            status=CallState.RINGING,
            step_deadline=deadline,
        )
        if call is not None:
            CallEvent.objects.create(call=call, seq=1, status=CallState.RINGING, at=at)
    return call


def call_answered(*, call: Call, by: str, at: datetime) -> None:
    """`call` is answered at `at`, by `by` (calls.models.AnsweredBy): it moves to in progress,
    inside the caller's transaction. A call in progress already (a forwarded call whose bridge
    fell through, then answered by voicemail) only changes who answered it."""
    values = {"answered_at": at, "answered_by": by, "updated_at": at}
    if call.status != CallState.IN_PROGRESS:
        call_move(
            call=call,
            expected=call.status,
            values={"status": CallState.IN_PROGRESS, **values},
            at=at,
        )
    elif Call.objects.filter(pk=call.pk, status=CallState.IN_PROGRESS).update(**values):
        for name, value in values.items():
            setattr(call, name, value)


def call_unanswered(*, call: Call) -> None:
    """The answer of `call` fell through (the caller left as it was bridged): nobody answered
    it after all. Its state stays; its end says how it went."""
    Call.objects.filter(pk=call.pk).update(answered_at=None, answered_by=None)
    call.answered_at = call.answered_by = None


# The state an inbound call ends in, by its outcome (docs/decisions.md): a blocked caller was
# declined, as a busy callee declines.
END_STATES = {
    Outcome.ANSWERED: CallState.COMPLETED,
    Outcome.MISSED: CallState.NO_ANSWER,
    Outcome.BLOCKED: CallState.BUSY,
}


def inbound_call_end(
    *, call: Call, outcome: str, duration: int, answered_by: str | None, at: datetime
) -> bool:
    """End the inbound `call` with `outcome` (calls.models.Outcome) in the state it calls for,
    inside the caller's transaction, its legs still up with it (the answered one with the
    call's `duration`), and count it in the owner's outcome counters. False when it ended
    already (recovery took it, or its agent did): nothing is written then."""
    values = {
        "status": END_STATES[outcome],
        "outcome": outcome,
        "answered_by": answered_by if outcome == Outcome.ANSWERED else None,
        "ended_at": at,
        "duration": duration,
        "step_deadline": None,
        "updated_at": at,
    }
    if call_move(call=call, expected=call.status, values=values, at=at) is None:
        return False
    legs_end(call_pk=call.pk, at=at, duration=duration)
    if call.number_id is not None:
        outcomes_counted([call])
    return True


def inbound_call_written(
    *,
    number,
    caller_id: str,
    outcome: str,
    duration: int,
    at: datetime,
    sip_call_id: str = "",
    answered_by: str | None = None,
    phone: str = "",
) -> Call:
    """An inbound call that has ended already, written whole (a call recorded by hand or by a
    tool: history.services.record_inbound_call), with the events of its way through the
    state table, its counter, and the leg that took it when a person (on `phone`) or a tab
    did. Inside the caller's transaction."""
    state = END_STATES[outcome]
    answered = outcome == Outcome.ANSWERED
    call = Call.objects.create(
        **_inbound(number=number, caller_id=caller_id, sip_call_id=sip_call_id, at=at),
        status=state,
        last_seq=3 if answered else 2,
        answered_at=at if answered else None,
        ended_at=at + timedelta(seconds=duration),
        duration=duration,
        outcome=outcome,
        answered_by=answered_by if answered else None,
    )
    ways = [CallState.RINGING, *([CallState.IN_PROGRESS] if answered else []), state]
    CallEvent.objects.bulk_create(
        CallEvent(call=call, seq=seq, status=way, at=at) for seq, way in enumerate(ways, start=1)
    )
    if answered and answered_by in (AnsweredBy.PERSON, AnsweredBy.BROWSER):
        _taken_by(call, browser=answered_by == AnsweredBy.BROWSER, phone=phone)
    outcomes_counted([call])
    return call


def _taken_by(call: Call, *, browser: bool, phone: str) -> None:
    """The leg, ended with `call`, that took it: a tab of its owner, or a person on `phone`."""
    Leg.objects.create(
        call=call,
        owner_id=call.owner_id,
        kind=LegKind.BROWSER if browser else LegKind.SIP,
        role=LegRole.FORWARD_TARGET,
        phone="" if browser else phone,
        user_id=call.owner_id if browser else None,
        status=LegState.ENDED,
        created_at=call.created_at,
        answered_at=call.answered_at,
        ended_at=call.ended_at,
        duration=call.duration,
    )


def outcomes_counted(calls: list[Call]) -> None:
    """Count ended inbound calls in their owners' outcome counters (`total` of the history),
    inside the caller's transaction."""
    counters_add(
        OutcomeCounter,
        [
            ({"owner_id": c.owner_id, "number_id": c.number_id, "outcome": c.outcome}, 1)
            for c in calls
        ],
    )


def number_calls_delete(number) -> list[str]:
    """A number is being deleted (virtual_numbers.services.number_deletion_register): the
    inbound calls to it go with it (their history, legs and voicemail, the files' names
    returned for deletion once that commits); outbound calls from it stay, without it."""
    inbound = Call.objects.filter(number=number, direction=Direction.INBOUND)
    files = Recording.objects.filter(call__in=inbound).exclude(name="")
    names = list(files.values_list("name", flat=True))
    inbound.delete()
    return names


# --- legs ----------------------------------------------------------------------------------
def leg_open(*, answered_at: datetime | None = None, **fields) -> Leg | None:
    """A new leg of a call (`fields`: call, owner, kind, role, dial, its target, its
    sip_call_id), ringing, or answered at `answered_at` (a tab that took the call); None when
    this dial of the call has a leg to that phone already."""
    status = LegState.RINGING if answered_at is None else LegState.ANSWERED
    return create_unless_taken(Leg.objects.create, status=status, answered_at=answered_at, **fields)


def leg_move(*, leg: Leg, new: str, values: dict | None = None) -> bool:
    """Move `leg` to `new` (calls.states.LEG_MOVES) with `values`, one conditional UPDATE:
    False when the table refuses (logged with the leg's and call's ids and both states) or
    the leg moved meanwhile. `leg` is updated in place."""
    old = leg.status
    if _refused(leg_move_allowed(old, new), f"leg {leg.pk} of call {leg.call_id}", old, new):
        return False
    values = {**(values or {}), "status": new}
    if not Leg.objects.filter(pk=leg.pk, status=old).update(**values):
        return False
    for name, value in values.items():
        setattr(leg, name, value)
    return True


def legs_end(*, call_pk, at: datetime, duration: int) -> None:
    """End every leg of the call still up, as the call ends: the answered one with the call's
    `duration`, the others with none."""
    up = Leg.objects.filter(call_id=call_pk, status__in=(LegState.RINGING, LegState.ANSWERED))
    up.filter(status=LegState.ANSWERED).update(
        status=LegState.ENDED, ended_at=at, duration=duration
    )
    up.update(status=LegState.ENDED, ended_at=at, duration=0)


def legs_settle(*, at: datetime) -> int:
    """End the legs of outbound calls that are over while their legs are up (their agent died
    with the legs up, and recovery ended the call): a leg left up would hold a place in the
    owner's quota of calls at once. Answered legs keep what their call lasted at most (their
    grant). How many ended."""
    over = Leg.objects.filter(
        status__in=(LegState.RINGING, LegState.ANSWERED),
        call__direction=Direction.OUTBOUND,
        call__status__in=TERMINAL_STATES,
    )
    return over.update(
        status=LegState.ENDED, ended_at=at, duration=Coalesce("talk_limit", Value(0))
    )
