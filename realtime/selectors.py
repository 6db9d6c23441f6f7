"""Reads of outbound calls: the caller's own (a 404 for anything else) and their pages."""

import contextlib
import json
import uuid
from dataclasses import dataclass

from django.core.files import File
from django.db.models import CharField, OuterRef, Q, Subquery

from accounts.models import User
from calls.models import Call, CallCounter, Direction, Recording, RecordingKind
from calls.states import TERMINAL_STATES
from core import events, parsing
from core.counters import counters_sum
from core.db import JSONList
from core.errors import NotFound
from core.fields import represent
from core.pagination import Cursor, Page, page_rows
from core.platform.compiled import CompiledInQuery
from core.recordings import recording_open, recording_opener
from realtime.serializers import CallDetailOutput
from virtual_numbers.selectors import numbers_column, numbers_from_column, numbers_shared_with


def call_find(*, user: User, call_id) -> Call | None:
    """The user's call with this callId, or None (also for a value no callId can be: not a
    string, or with control characters, which are refused when calls are submitted)."""
    if not call_find_possible(call_id):
        return None
    return Call.objects.filter(owner=user, call_id=call_id).first()


def calls_find(keys) -> dict[tuple, Call]:
    """The calls with these (owner pk, callId) keys, by key, in one query; keys whose callId
    no callId can be (as call_find) are left out."""
    keys = {(owner, call_id) for owner, call_id in keys if call_find_possible(call_id)}
    if not keys:
        return {}
    calls = Call.objects.filter(
        owner_id__in={owner for owner, _ in keys}, call_id__in={call_id for _, call_id in keys}
    )
    return {key: call for call in calls if (key := (call.owner_id, call.call_id)) in keys}


def call_find_possible(call_id) -> bool:
    """Whether `call_id` could be a stored callId: a string, not empty (an inbound call's, which
    has none), with no control characters."""
    return isinstance(call_id, str) and call_id != "" and not parsing.id_problem(call_id)


@dataclass(frozen=True)
class Submitter:
    """What a batch of submits needs of one of its users before it writes: their numbers,
    (pk, e164) oldest first, and which of the batch's callIds they have used already."""

    numbers: list[tuple[str, str]]
    call_ids: frozenset[str]
    owned: dict  # the outbox writers' owner columns (core.events), by name


def submitters(*, owner_ids, call_ids) -> dict:
    """Submitter of each of these users, by pk, in one query (a user is left out only when the
    user is gone): the batch's first read, without a lock. A value no callId can be (as
    call_find) is not looked for."""
    call_ids = sorted({call_id for call_id in call_ids if call_find_possible(call_id)})
    rows = _SUBMITTERS.rows(owners=list(owner_ids), call_ids=call_ids)
    owned = events.outbox_owner_column_names()
    return {
        row["pk"]: Submitter(
            numbers_from_column(row["numbers_held"]),
            frozenset(json.loads(row["used"] or "[]")),
            {name: row[f"owned_{name}"] for name in owned},
        )
        for row in rows
    }


def _submitters_query(*, owners, call_ids):
    """The rows of submitters: each user's numbers, which of `call_ids` they used, and the
    outbox writers' owner columns."""
    used = Call.objects.filter(owner=OuterRef("pk"), call_id__in=call_ids)
    used = used.order_by().values("owner").annotate(value=JSONList("call_id")).values("value")
    return User.objects.filter(pk__in=owners).values(
        "pk",
        numbers_held=numbers_column(),
        used=Subquery(used),
        **{f"owned_{name}": column for name, column in events.outbox_owner_columns().items()},
    )


# The batch's first read, compiled once per process and size bucket (core.platform.compiled):
# building it through the ORM cost more than running it (issue 40).
_SUBMITTERS = CompiledInQuery(
    _submitters_query, lists={"owners": User._meta.pk, "call_ids": CharField()}
)


def calls_ended(*, pks: list) -> list:
    """Which of these calls have ended (a terminal state) or are gone (their owner deleted
    their account): for the telephony agent, which hangs up a call that ended elsewhere (the
    user's cancel, recovery, a deletion)."""
    up = {
        str(pk)
        for pk in Call.objects.filter(pk__in=pks)
        .exclude(status__in=TERMINAL_STATES)
        .values_list("pk", flat=True)
    }
    return [pk for pk in pks if str(pk) not in up]


def call_access(*, user: User, call_id: str) -> Call:
    """The user's call with this callId; NotFound for one that is unknown or another user's."""
    call = call_find(user=user, call_id=call_id)
    if call is None:
        raise NotFound()
    return call


def inbound_call_reachable(*, user: User, call_ref) -> Call:
    """The inbound call `call_ref` (its ledger id) of a number `user` owns or is an active
    member of; NotFound for an id that is malformed, unknown, outbound, or of anyone else's
    number (never saying which)."""
    try:
        pk = uuid.UUID(str(call_ref))
    except ValueError:
        raise NotFound() from None
    call = (
        Call.objects.filter(pk=pk, direction=Direction.INBOUND)
        .filter(Q(number__owner=user) | Q(number__in=numbers_shared_with(user)))
        .first()
    )
    if call is None:
        raise NotFound()
    return call


def call_transferable_find(*, user: User, call_ref) -> Call:
    """The call a transfer names (`POST /api/calls/:call/transfer`, issue 58): an inbound call
    `user` may reach by its ledger id (inbound_call_reachable), else an outbound call of
    `user`'s own by its callId or its ledger id. NotFound for anything else (never saying
    which)."""
    try:
        return inbound_call_reachable(user=user, call_ref=call_ref)
    except NotFound:
        pass
    call = call_find(user=user, call_id=call_ref)
    if call is None:
        with contextlib.suppress(ValueError):
            pk = uuid.UUID(str(call_ref))
            call = Call.objects.filter(pk=pk, owner=user).first()
    if call is None or call.direction != Direction.OUTBOUND:
        raise NotFound()
    return call


def call_recording_open(*, call: Call, recording_id: str) -> File:
    """The WAV of the call's recording `recording_id`, open for reading; NotFound for an id
    that is malformed, unknown, another call's, or whose file is gone."""
    try:
        pk = uuid.UUID(str(recording_id))
    except ValueError:
        raise NotFound() from None
    recording = Recording.objects.filter(pk=pk, call=call, kind=RecordingKind.RECORD).first()
    if recording is None:
        raise NotFound()
    return recording_open(recording.name)


def calls_page(
    *, user: User, status: str | None, limit: int, offset: int, before: Cursor | None = None
) -> Page:
    """The user's outbound calls, newest first; same paging as history. `total` is summed
    from at most 9 counter rows, not counted."""
    calls = Call.objects.filter(owner=user, direction=Direction.OUTBOUND)
    counters = CallCounter.objects.filter(owner=user)
    if status is not None:
        calls = calls.filter(status=status)
        counters = counters.filter(status=status)
    total = counters_sum(counters)
    page, next_cursor = [], None
    if offset < total:  # past the end there is nothing to read, however large the offset
        page, next_cursor = page_rows(calls, limit=limit, offset=offset, before=before)
    return Page(records=page, total=total, limit=limit, offset=offset, next_cursor=next_cursor)


def calls_export(*, user: User) -> dict:
    """The user's outbound calls for their export (core.userdata): each as `GET
    /api/calls/:callId` answers it, timeline included, newest first."""

    def each():
        calls = Call.objects.filter(owner=user, direction=Direction.OUTBOUND)
        calls = calls.prefetch_related("events", "recordings")
        for call in calls.order_by("-created_at", "-id").iterator(chunk_size=200):
            yield represent(CallDetailOutput, call)

    return {"calls": each()}


def call_recording_files(*, user: User) -> list:
    """The recordings of the user's calls for their export: (name in the archive, opener)
    pairs, `recordings/<recording id>.wav` (the `id` of the call's `recordings`)."""
    kept = Recording.objects.filter(call__owner=user, kind=RecordingKind.RECORD)
    kept = kept.order_by("-created_at")
    return [
        (f"recordings/{pk}.wav", recording_opener(name))
        for pk, name in kept.values_list("pk", "name").iterator(chunk_size=500)
    ]
