"""How call records get written: record_inbound_call, the only way."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from core import events, metrics
from core.counters import Drift, counters_add, counters_recount
from core.errors import InvalidRequest, NotFound, invalid_fields
from core.fields import represent
from core.phone import e164_possible, e164_problem
from core.recordings import recordings_delete_on_commit, recordings_storage
from core.webrtc import BROWSER
from history.models import (
    ANONYMOUS_CALLER,
    AnsweredBy,
    CallRecord,
    CallRecordCounter,
    CallStatus,
    TranscriptStatus,
)
from history.notifications import call_mail_queue, voicemail_mail_withdraw
from history.serializers import CallRecordOutput
from history.tasks import schedule_transcription, transcript_status_for
from virtual_numbers.models import Number
from virtual_numbers.selectors import caller_blocked

DURATION_MAX_SECONDS = 7 * 24 * 3600
# A message deleted takes its transcript with it.
NO_TRANSCRIPT = {
    "transcript": "",
    "transcript_confidence": None,
    "transcript_status": None,
    "transcribe_lease_until": None,
}


def call_record_event(*, record: CallRecord) -> dict:
    """The `call_record` frame pushed to the owner's sockets: the record as the history API
    answers it (CallRecordOutput)."""
    return {"type": "call_record", **represent(CallRecordOutput, record)}


def record_inbound_call(
    *,
    number: Number,
    caller_num: str,
    status: str,
    duration: int,
    at: datetime | None = None,
    sip_call_id: str = "",
    recording: str = "",
    recording_seconds: float | None = None,
    answered_by: str | None = None,
    forwarded_to: str | None = None,
    record_id=None,
) -> CallRecord:
    """Record an inbound call on `number` and push `call_record` to its owner after commit.

    Checks the caller (E.164, or ANONYMOUS_CALLER for a withheld caller ID), status
    (answered|missed|blocked) and duration (whole seconds, 0..one week); raises
    InvalidRequest otherwise. A caller on the number's blocklist is recorded as `blocked`
    with duration 0 whatever was passed. NotFound when the number has been deleted
    meanwhile. The owner's counters (`total` of the history list) move in the record's
    transaction. `sip_call_id` makes it idempotent: a Call-ID already recorded returns its
    record and writes and pushes nothing. `recording` names the voicemail file in the
    recordings storage, already saved. `answered_by` (forward, voicemail) is for answered
    calls only, and `forwarded_to` (E.164: the owner's phone that took it, or "browser": one of
    their console tabs) for forwarded ones. `record_id`: the record's id, the call ledger's
    id of the call (calls.Call), so that both name the call alike; a new one when None.
    """
    if sip_call_id:
        existing = CallRecord.objects.filter(sip_call_id=sip_call_id).first()
        if existing is not None:
            return existing
    caller = ANONYMOUS_CALLER if caller_num == ANONYMOUS_CALLER else e164_possible(caller_num)
    if caller is None:
        # The sentence the blocklist's caller_num field says (core.fields.CallerNumberField).
        raise invalid_fields({"caller_num": [e164_problem(caller_num, assigned=False)]})
    if status not in CallStatus.values:
        raise InvalidRequest(
            "status must be answered, missed or blocked.",
            fields={"status": [f"Must be one of {', '.join(CallStatus.values)}."]},
        )
    if (
        isinstance(duration, bool)
        or not isinstance(duration, int)
        or not (0 <= duration <= DURATION_MAX_SECONDS)
    ):
        raise InvalidRequest(
            "duration must be a whole number of seconds, at least 0.",
            fields={"duration": ["Must be an integer from 0 to 604800."]},
        )
    _answer_check(status, answered_by, forwarded_to)
    if caller_blocked(number=number, caller_num=caller):
        status, duration, answered_by, forwarded_to = CallStatus.BLOCKED, 0, None, None
    with transaction.atomic():
        # The number's row, locked as number_delete locks it: a record and its counter land
        # before a deletion of the number (which then takes both) or not at all.
        if not Number.objects.select_for_update(no_key=True).filter(pk=number.pk).exists():
            raise NotFound()
        record = CallRecord.objects.create(
            **({} if record_id is None else {"id": record_id}),
            number=number,
            owner_id=number.owner_id,
            caller_num=caller,
            status=status,
            duration=duration,
            created_at=at or timezone.now(),
            sip_call_id=sip_call_id,
            recording=recording,
            recording_seconds=None if recording_seconds is None else round(recording_seconds, 2),
            answered_by=answered_by,
            forwarded_to=forwarded_to,
            transcript_status=transcript_status_for(recording=recording, seconds=recording_seconds),
        )
        call_record_counters_add(records=[record])
        if record.transcript_status == TranscriptStatus.PENDING:
            schedule_transcription(record.pk)
        owner = User.objects.get(pk=number.owner_id)
        call_mail_queue(record=record, owner=owner)
        events.send_to_user_on_commit(
            user_id=number.owner_id, event=call_record_event(record=record)
        )
        metrics.count_on_commit(metrics.inbound_calls, status)
    return record


def _answer_check(status: str, answered_by: str | None, forwarded_to: str | None) -> None:
    if answered_by is not None and (
        answered_by not in AnsweredBy.values or status != CallStatus.ANSWERED
    ):
        raise InvalidRequest(
            "answered_by is forward or voicemail, and only for an answered call.",
            fields={"answered_by": ["Must be forward or voicemail, on an answered call."]},
        )
    if forwarded_to is not None and (
        answered_by != AnsweredBy.FORWARD
        or (forwarded_to != BROWSER and e164_possible(forwarded_to) != forwarded_to)
    ):
        raise InvalidRequest(
            'forwarded_to is the E.164 number (or "browser") that took a forwarded call.',
            fields={"forwarded_to": ['Must be an E.164 number or "browser", on a forwarded call.']},
        )


def call_record_counters_add(*, records: list[CallRecord]) -> None:
    """Count `records` in their owners' counters, inside the caller's transaction. For
    record_inbound_call, and for tools that write records in bulk (seed_history, the test
    factories), which must keep `total` exact too."""
    counters_add(
        CallRecordCounter,
        [
            ({"owner_id": r.owner_id, "number_id": r.number_id, "status": r.status}, 1)
            for r in records
        ],
    )


def call_record_counters_recount() -> list[Drift]:
    """Recount every history counter from the records and correct the ones that drifted
    (safe beside live writers: core.counters.counters_recount); return the corrections."""
    return counters_recount(CallRecord, CallRecordCounter, ["owner_id", "number_id", "status"])


# --- voicemail -----------------------------------------------------------------------------
def call_record_recording_delete(*, record: CallRecord) -> None:
    """Delete a record's voicemail (the record stays, with recording_url null); NotFound when
    it has none (never had, or already deleted). The file goes once the change commits."""
    with transaction.atomic():
        locked = CallRecord.objects.select_for_update().filter(pk=record.pk).first()
        if locked is None or not locked.recording:
            raise NotFound()
        CallRecord.objects.filter(pk=locked.pk).update(
            recording="", recording_seconds=None, **NO_TRANSCRIPT
        )
        recordings_delete_on_commit([locked.recording])
        voicemail_mail_withdraw(record=locked)
    record.recording, record.recording_seconds = "", None
    for field, value in NO_TRANSCRIPT.items():
        setattr(record, field, value)


def call_record_mark_heard(*, record: CallRecord) -> None:
    """The owner heard this message in the mailbox: it is no longer new."""
    CallRecord.objects.filter(pk=record.pk).update(heard=True)
    record.heard = True


PURGE_BATCH = 500
ORPHAN_AGE = timedelta(hours=1)


def call_record_recordings_purge(*, now: datetime | None = None) -> int:
    """Delete the voicemail of records older than VOICEMAIL_RETENTION_DAYS (the records stay,
    with recording_url null), and recording files that no record names and that are older
    than an hour (their record was deleted with its owner); return the files deleted."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.VOICEMAIL_RETENTION_DAYS)
    deleted = 0
    while True:
        with transaction.atomic():
            batch = list(
                CallRecord.objects.select_for_update()
                .filter(created_at__lt=cutoff)
                .exclude(recording="")
                .order_by("created_at")
                .values_list("pk", "recording")[:PURGE_BATCH]
            )
            if not batch:
                break
            CallRecord.objects.filter(pk__in=[pk for pk, _ in batch]).update(
                recording="", recording_seconds=None, **NO_TRANSCRIPT
            )
            recordings_delete_on_commit([name for _, name in batch])
        deleted += len(batch)
    return deleted + _orphans_purge(now=now)


def _orphans_purge(*, now: datetime) -> int:
    storage = recordings_storage()
    try:
        _, names = storage.listdir("")
    except FileNotFoundError:
        return 0
    orphans = []
    for start in range(0, len(names), PURGE_BATCH):
        chunk = names[start : start + PURGE_BATCH]
        named = set(
            CallRecord.objects.filter(recording__in=chunk).values_list("recording", flat=True)
        )
        for name in chunk:
            if name not in named and storage.get_modified_time(name) < now - ORPHAN_AGE:
                orphans.append(name)
    recordings_delete_on_commit(orphans)
    return len(orphans)


def history_erase(*, user: User) -> None:
    """Account deletion (core.userdata): every call record of `user` and their counters, and
    their voicemail files once the deletion commits. Inside the deletion's transaction."""
    records = CallRecord.objects.filter(owner=user)
    names = list(records.exclude(recording="").values_list("recording", flat=True))
    records.delete()
    CallRecordCounter.objects.filter(owner=user).delete()
    recordings_delete_on_commit(names)
