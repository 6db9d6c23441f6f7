from __future__ import annotations

import uuid
from functools import partial

from django.db.models import CharField, DateTimeField, Q, QuerySet, Sum, UUIDField

from accounts.models import User
from calls.models import OutcomeCounter, Recording, RecordingKind, TranscriptStatus
from core.errors import NotFound
from core.fields import represent
from core.pagination import Cursor, Page, page_rows
from core.platform.compiled import CompiledQuery
from core.recordings import recording_opener
from history.records import Record, history_calls, record_of, record_rows, records
from history.serializers import CallRecordOutput
from virtual_numbers.models import Number
from virtual_numbers.selectors import number_reachable, numbers_shared_with


def history_page(
    *,
    user: User,
    status: str | None,
    limit: int,
    offset: int,
    number_id: uuid.UUID | None = None,
    before: Cursor | None = None,
) -> Page:
    """The user's call records (history.records), newest first (created_at desc, then id
    desc), from `before` (a cursor: rows strictly older than it) and `offset`.

    Served by the ledger's (owner, direction[, outcome], created_at, id) indexes: a range scan
    in order, never a sort over the user's calls. `total` is the filter's whole total, summed
    from at most 15 counter rows, not counted. `number_id` must be one of the user's numbers
    (else NotFound), or one shared with them (issue 57): then the page is the number's
    records, read under its owner as the owner reads them. Without `number_id`, only the
    user's own numbers' records (docs/decisions.md, issue 57).
    """
    owner = user.pk
    if number_id is not None:
        owner = (
            Number.objects.filter(number_reachable(user=user), pk=number_id)
            .values_list("owner_id", flat=True)
            .first()
        )
        if owner is None:
            raise NotFound()
    filters = {
        name: value
        for name, value in (("status", status), ("number_id", number_id))
        if value is not None
    }
    summed = _TOTAL.first(owner=owner, **filters)
    total = summed["total"] if summed else 0
    page, next_cursor = [], None
    if offset == 0 and total:  # the first page, or a cursor's: one compiled statement
        at = {} if before is None else {"before_at": before.created_at, "before_id": before.id}
        rows = _page(limit).rows(owner=owner, **filters, **at)
        page = [record_of(row) for row in rows[:limit]]
        next_cursor = Cursor.after(page[-1]).encode() if len(rows) > limit else None
    elif offset < total:  # past the end there is nothing to read, however large the offset
        calls, _counters = history_querysets(user=owner, status=status, number_id=number_id)
        page, next_cursor = page_rows(
            calls,
            limit=limit,
            offset=offset,
            before=before,
            fetch=lambda ids: records(calls.filter(pk__in=ids)),
        )
    return Page(records=page, total=total, limit=limit, offset=offset, next_cursor=next_cursor)


def _page_query(*, owner, status=None, number_id=None, before_at=None, before_id=None, limit):
    """The rows of a page read from its start (offset 0): page_rows' read, as values."""
    calls, _counters = history_querysets(user=owner, status=status, number_id=number_id)
    if before_at is not None:
        calls = calls.filter(Cursor(before_at, before_id).older())
    return record_rows(calls.order_by("-created_at", "-id"))[: limit + 1]


# A page from its start, compiled once per process, filter and limit (a LIMIT is part of the
# SQL): reading the first page or a cursor's through the ORM cost more to build than to run.
_PAGES: dict[int, CompiledQuery] = {}


def _page(limit: int) -> CompiledQuery:
    query = _PAGES.get(limit)
    if query is None:
        query = _PAGES[limit] = CompiledQuery(
            partial(_page_query, limit=limit),
            owner=UUIDField(),
            status=CharField(),
            number_id=UUIDField(),
            before_at=DateTimeField(),
            before_id=UUIDField(),
        )
    return query


def history_querysets(
    *, user: User, status: str | None = None, number_id: uuid.UUID | None = None
) -> tuple[QuerySet, QuerySet]:
    """The user's history calls under the history list's filters, and the counters whose sum
    is their total. history_page reads them; the benchmarks compile the same ones."""
    calls = history_calls().filter(owner=user)
    counters = OutcomeCounter.objects.filter(owner=user)
    if number_id is not None:
        calls = calls.filter(number_id=number_id)
        counters = counters.filter(number_id=number_id)
    if status is not None:
        calls = calls.filter(outcome=status)
        counters = counters.filter(outcome=status)
    return calls, counters


def _total_query(*, owner, status=None, number_id=None) -> QuerySet:
    """history_page's `total` as one values() row: the sum of the filter's counters."""
    _calls, counters = history_querysets(user=owner, status=status, number_id=number_id)
    return counters.order_by().values("owner").annotate(total=Sum("count"))


# Read on every page, so compiled once per process and filter (core.platform.compiled).
_TOTAL = CompiledQuery(_total_query, owner=UUIDField(), status=CharField(), number_id=UUIDField())


def call_record_access(*, user: User, record_id) -> Record:
    """The call record `record_id` of one of the user's numbers, or of a number shared with
    them (an active member: issue 57); NotFound for an id that is malformed, unknown or of
    anyone else's number (never saying which), a removed member's included."""
    try:
        pk = uuid.UUID(str(record_id))
    except ValueError as exc:
        raise NotFound() from exc
    reachable = Q(owner=user) | Q(number_id__in=numbers_shared_with(user))
    found = records(history_calls().filter(reachable, pk=pk))
    if not found:
        raise NotFound()
    return found[0]


def mailbox_messages(*, number: Number) -> list[Record]:
    """The number's new voicemail (recorded, not yet heard), newest first."""
    new = Recording.objects.filter(
        kind=RecordingKind.VOICEMAIL, heard=False, call__number=number
    ).exclude(name="")
    calls = history_calls().filter(number=number, recordings__in=new)
    return records(calls.order_by("-created_at", "-id"))


def voicemail_file_name(record_id) -> str:
    """Where a record's voicemail sits in the user's export archive."""
    return f"voicemail/{record_id}.wav"


def history_export(*, user: User) -> dict:
    """The user's call history for their export (core.userdata): every record as the history
    API answers it, newest first, with `recording_file`, the name of its voicemail in the
    archive (null: none)."""

    def each():
        calls = history_calls().filter(owner=user).order_by("-created_at", "-id")
        for row in record_rows(calls).iterator(chunk_size=500):
            record = record_of(row)
            yield {
                **represent(CallRecordOutput, record),
                "recording_file": voicemail_file_name(record.pk) if record.recording else None,
            }

    return {"history": each()}


def voicemail_files(*, user: User) -> list:
    """The user's voicemail messages for their export: (name in the archive, opener) pairs;
    an opener answers None for a file that is gone (purged a moment ago)."""
    kept = (
        Recording.objects.filter(kind=RecordingKind.VOICEMAIL, call__owner=user)
        .exclude(name="")
        .order_by("-created_at")
    )
    return [
        (voicemail_file_name(call_pk), recording_opener(name))
        for call_pk, name in kept.values_list("call_id", "name").iterator(chunk_size=500)
    ]


def transcript_kept(record_id: str) -> bool:
    """Whether the record's message still has its transcript (not deleted since)."""
    try:
        pk = uuid.UUID(str(record_id))
    except ValueError:
        return False
    return Recording.objects.filter(
        call_id=pk, kind=RecordingKind.VOICEMAIL, transcript_status=TranscriptStatus.DONE
    ).exists()
