"""A call record: the history's view of one inbound call that ended, read from the call ledger
(calls.Call, its voicemail calls.Recording and the Leg that took it). The history keeps no
rows of its own (docs/decisions.md, "History is a read of the ledger").

`Record` carries what the history API, the console, the mail and the frames show of a call, in
the history's words (`status` answered|missed|blocked, `answered_by` forward|voicemail|app,
`forwarded_to` a phone, a SIP URI or "browser", `ring_entry` and `answered_member_*`: which
entry of the ring list took it, and whose; `transferred_to`: who that person handed it on
to), with `id` the call's own. `record_rows` reads
records with one statement: the call, its number's two columns, its voicemail (a LEFT JOIN)
and, for a call a person took, the leg that took it (subqueries on that row only).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Case,
    CharField,
    Exists,
    FilteredRelation,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    UUIDField,
    Value,
    When,
)
from django.db.models.functions import Coalesce, NullIf

from calls.models import HISTORY, Call, Leg, LegRole, RecordingKind
from calls.models import AnsweredBy as LedgerAnsweredBy
from core.fields import represent
from core.platform.models import loaded
from core.webrtc import BROWSER
from history.models import AnsweredBy, CallStatus
from history.serializers import CallRecordOutput
from virtual_numbers.models import Number

# Who answered, in the history's words (`forward`: a person on the owner's phone or a tab).
ANSWERED_BY = {
    LedgerAnsweredBy.PERSON: AnsweredBy.FORWARD,
    LedgerAnsweredBy.BROWSER: AnsweredBy.FORWARD,
    LedgerAnsweredBy.VOICEMAIL: AnsweredBy.VOICEMAIL,
    LedgerAnsweredBy.APP: AnsweredBy.APP,
}


def ledger_answered_by(answered_by: str | None, forwarded_to: str | None) -> str | None:
    """The ledger's AnsweredBy of a call the history's words describe."""
    if answered_by == AnsweredBy.FORWARD:
        return LedgerAnsweredBy.BROWSER if forwarded_to == BROWSER else LedgerAnsweredBy.PERSON
    return answered_by


@dataclass
class Record:
    id: uuid.UUID
    owner_id: uuid.UUID
    number_id: uuid.UUID
    number: Number  # its `number` and `alias` loaded
    caller_num: str
    status: str
    duration: int
    created_at: datetime
    sip_call_id: str
    answered_by: str | None
    forwarded_to: str | None
    recording: str = ""  # the voicemail's file; empty: none
    recording_seconds: float | None = None
    heard: bool = False
    transcript: str = ""
    transcript_confidence: float | None = None
    transcript_status: str | None = None
    voicemail_id: uuid.UUID | None = None  # its calls.Recording, if it ever had one
    ring_entry: int | None = None  # the ring list's entry that took it (issue 57)
    transferred_to: str | None = None  # who the person who took it handed it on to (issue 58)
    answered_member_id: uuid.UUID | None = None  # the person whose tab or ring phone took it
    answered_member_email: str | None = None
    seq: int = 0  # the number of the call's newest event (its end, or what came after)

    @property
    def pk(self) -> uuid.UUID:
        return self.id

    @property
    def recording_url(self) -> str | None:
        """Where the owner fetches the voicemail: a path of the API, as the record's other
        links are, or None when there is none."""
        return f"/api/history/{self.id}/recording" if self.recording else None

    def get_status_display(self) -> str:
        return CallStatus(self.status).label

    def get_answered_by_display(self) -> str:
        return AnsweredBy(self.answered_by).label if self.answered_by else ""


def record_frame(kind: str, record: Record) -> dict:
    """A frame (and webhook body, and Matrix notice's source) of `kind` about `record`: the
    record as the history API answers it, with its call's ledger id (`call`, the record's
    `id`) and the number of the event it reports (`seq`)."""
    return {
        "type": kind,
        **represent(CallRecordOutput, record),
        "call": str(record.id),
        "seq": record.seq,
    }


def history_calls() -> QuerySet:
    """The calls the history shows: inbound, ended, on a number still there (calls.models
    HISTORY, the condition of the history's partial indexes)."""
    return Call.objects.filter(HISTORY)


def _took():
    """The leg that took a forwarded call: at most one, the bridge's winner (the others were
    cancelled, or ended unbridged)."""
    return Leg.objects.filter(
        call=OuterRef("pk"), role=LegRole.FORWARD_TARGET, answered_at__isnull=False
    ).order_by()


def _forwarded_phone():
    """The phone or SIP URI of the leg that took a call a person answered (else null)."""
    reached = _took().annotate(reached=Coalesce(NullIf("phone", Value("")), "sip_uri"))
    return Case(
        When(answered_by=LedgerAnsweredBy.PERSON, then=Subquery(reached.values("reached")[:1])),
        default=Value(None),
        output_field=CharField(),
    )


def _transferred_to():
    """The phone or SIP URI a call a person answered (on a phone or a tab) was handed on to
    (issue 58: its last `transfer_target` leg that took it, else the last one tried), else
    null. A call may be handed on again by whoever took it, each a dial of its own: the
    latest dial wins: the leg with no later one of its kind (NOT EXISTS, so that the
    history's plans stay free of sorts: test_query_plans)."""
    transfers = Leg.objects.filter(role=LegRole.TRANSFER_TARGET)
    reached = Coalesce(NullIf("phone", Value("")), "sip_uri")

    def latest(legs):
        later = legs.filter(call=OuterRef("call"), dial__gt=OuterRef("dial"))
        return legs.filter(call=OuterRef("pk")).exclude(Exists(later)).order_by()

    taken = latest(transfers.filter(answered_at__isnull=False)).annotate(reached=reached)
    legs = latest(transfers).annotate(reached=reached)
    return Case(
        When(
            answered_by__in=(LedgerAnsweredBy.PERSON, LedgerAnsweredBy.BROWSER),
            then=Coalesce(
                Subquery(taken.values("reached")[:1]), Subquery(legs.values("reached")[:1])
            ),
        ),
        default=Value(None),
        output_field=CharField(),
    )


def _forwarded_by(field: str, output_field):
    """A column of the leg that took a forwarded call (`field`: its ring list entry, the
    member whose entry it was, their address), else null."""
    return Case(
        When(
            answered_by__in=(LedgerAnsweredBy.PERSON, LedgerAnsweredBy.BROWSER),
            then=Subquery(_took().values(field)[:1]),
        ),
        default=Value(None),
        output_field=output_field,
    )


CALL_COLUMNS = (
    "id",
    "owner_id",
    "number_id",
    "caller_id",
    "outcome",
    "duration",
    "created_at",
    "sip_call_id",
    "answered_by",
    "last_seq",
    "number__number",
    "number__alias",
)
VOICEMAIL_COLUMNS = (
    "id",
    "name",
    "seconds",
    "heard",
    "transcript",
    "transcript_confidence",
    "transcript_status",
)


def record_rows(calls: QuerySet) -> QuerySet:
    """`calls` as rows of records (record_of), in one statement."""
    voicemail = FilteredRelation(
        "recordings", condition=Q(recordings__kind=RecordingKind.VOICEMAIL)
    )
    return calls.annotate(voicemail=voicemail).values(
        *CALL_COLUMNS,
        *(f"voicemail__{name}" for name in VOICEMAIL_COLUMNS),
        forwarded_phone=_forwarded_phone(),
        transferred_to=_transferred_to(),
        ring_entry=_forwarded_by("ring_entry", IntegerField()),
        member_id=_forwarded_by("user_id", UUIDField()),
        member_email=_forwarded_by("user__email", CharField()),
    )


def record_of(row: dict) -> Record:
    """The Record of a row of record_rows, its number loaded as `.only()` would load it
    (without Model.__init__ for each: building a page's records through it cost more than
    reading them)."""
    number = loaded(
        Number,
        {"id": row["number_id"], "number": row["number__number"], "alias": row["number__alias"]},
    )
    by = row["answered_by"]
    return Record(
        id=row["id"],
        owner_id=row["owner_id"],
        number_id=row["number_id"],
        number=number,
        caller_num=row["caller_id"],
        status=row["outcome"],
        duration=row["duration"] or 0,
        created_at=row["created_at"],
        sip_call_id=row["sip_call_id"],
        answered_by=ANSWERED_BY.get(by),
        forwarded_to=BROWSER if by == LedgerAnsweredBy.BROWSER else row["forwarded_phone"],
        ring_entry=row["ring_entry"],
        transferred_to=row["transferred_to"],
        answered_member_id=row["member_id"],
        answered_member_email=row["member_email"],
        recording=row["voicemail__name"] or "",
        recording_seconds=row["voicemail__seconds"],
        heard=bool(row["voicemail__heard"]),
        transcript=row["voicemail__transcript"] or "",
        transcript_confidence=row["voicemail__transcript_confidence"],
        transcript_status=row["voicemail__transcript_status"],
        voicemail_id=row["voicemail__id"],
        seq=row["last_seq"],
    )


def records(calls: QuerySet) -> list[Record]:
    """The records of `calls` (history calls), in their order."""
    return [record_of(row) for row in record_rows(calls)]


def record_by_id(record_id) -> Record | None:
    """The record of call `record_id`, or None when it is no history call."""
    found = records(history_calls().filter(pk=record_id))
    return found[0] if found else None
