"""How calls end in the history: every inbound call that ends is recorded by inbound_call_ended
(the telephony agent's) or record_inbound_call (by hand, or a tool), each ending it in the call
ledger, keeping its voicemail and counting it, in one transaction; and what may change of a
record after (its voicemail heard, deleted, purged)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from calls import services as ledger
from calls.models import Call, OutcomeCounter, Recording, RecordingKind
from core import events, metrics
from core.counters import Drift, counters_recount
from core.errors import InvalidRequest, NotFound, invalid_fields
from core.phone import e164_possible, e164_problem
from core.recordings import (
    PURGE_BATCH,
    recordings_delete_on_commit,
    recordings_purge,
    recordings_storage,
)
from core.webrtc import BROWSER
from history.models import ANONYMOUS_CALLER, AnsweredBy, CallStatus, TranscriptStatus
from history.notifications import call_mail_queue, voicemail_mail_withdraw
from history.records import (
    Record,
    history_calls,
    ledger_answered_by,
    record_by_id,
    record_frame,
)
from history.tasks import schedule_transcription, transcript_status_for
from virtual_numbers.models import Number
from virtual_numbers.selectors import caller_blocked, number_members_heard

DURATION_MAX_SECONDS = 7 * 24 * 3600
WORDS = {"outcome": "status"}  # the ledger's names in the history's words
# A message deleted takes its file and its transcript with it; whether it was heard stays.
NO_MESSAGE = {
    "name": "",
    "seconds": None,
    "transcript": "",
    "transcript_confidence": None,
    "transcript_status": None,
    "transcribe_lease_until": None,
}


def call_record_event(*, record: Record) -> dict:
    """The `call_record` frame pushed to the owner's sockets: the record as the history API
    answers it (CallRecordOutput), with the call's ledger id (`call`, the record's `id`) and
    the number of the event it reports (`seq`: the call's end)."""
    return record_frame("call_record", record)


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
) -> Record:
    """Record an inbound call on `number` that ended already (written whole into the call
    ledger: calls.services.inbound_call_written) and push `call_record` to its owner after
    commit.

    Checks the caller (E.164, or ANONYMOUS_CALLER for a withheld caller ID), status
    (answered|missed|blocked) and duration (whole seconds, 0..one week); raises
    InvalidRequest otherwise. A caller on the number's blocklist is recorded as `blocked`
    with duration 0 whatever was passed. NotFound when the number has been deleted
    meanwhile. `sip_call_id` makes it idempotent: a Call-ID already recorded returns its
    record and writes and pushes nothing. `recording` names the voicemail file in the
    recordings storage, already saved. `answered_by` (forward, voicemail, app) is for answered
    calls only, and `forwarded_to` (E.164: the owner's phone that took it, or "browser": one of
    their console tabs) for forwarded ones.
    """
    if sip_call_id:
        existing = history_calls().filter(sip_call_id=sip_call_id).values_list("pk", flat=True)
        if existing and (record := record_by_id(existing[0])) is not None:
            return record
    caller = _caller_checked(caller_num)
    _duration_check(status, duration)
    _answer_check(status, answered_by, forwarded_to)
    if caller_blocked(number=number, caller_num=caller):
        status, duration, answered_by, forwarded_to = CallStatus.BLOCKED, 0, None, None
    with transaction.atomic():
        _number_lock(number)
        call = ledger.inbound_call_written(
            number=number,
            caller_id=caller,
            outcome=status,
            duration=duration,
            at=at or timezone.now(),
            sip_call_id=sip_call_id,
            answered_by=ledger_answered_by(answered_by, forwarded_to),
            phone=forwarded_to if forwarded_to not in (None, BROWSER) else "",
        )
        return _recorded(call, number=number, recording=recording, seconds=recording_seconds)


def inbound_call_ended(
    *,
    call: Call,
    status: str,
    duration: int,
    answered_by: str | None,
    recording: str = "",
    recording_seconds: float | None = None,
) -> Record | None:
    """The telephony agent's inbound `call` is over: end it in the ledger with outcome
    `status` (calls.services.inbound_call_end), answered by `answered_by` (the ledger's
    AnsweredBy; a person's phone is the leg that took it), keep its voicemail, count
    it and push `call_record`, in one transaction. A caller on the number's blocklist by now
    is `blocked`. None when it ended already (recovery took it after its agent was taken for
    dead) or its number was deleted meanwhile: then no record is written."""
    caller = _caller_checked(call.caller_id)
    _duration_check(status, duration)
    with transaction.atomic():
        number = call.number if call.number_id is not None else None
        if number is not None and not _number_exists_locked(number):
            number = None
        if number is not None and caller_blocked(number=number, caller_num=caller):
            status, duration, answered_by = CallStatus.BLOCKED, 0, None
        if number is None:
            call.number_id = None  # ends, and is no record: its number is gone
        ended = ledger.inbound_call_end(
            call=call,
            outcome=status,
            duration=duration,
            answered_by=answered_by,
            at=timezone.now(),
        )
        if not ended or number is None:
            return None
        return _recorded(call, number=number, recording=recording, seconds=recording_seconds)


def _recorded(call: Call, *, number: Number, recording: str, seconds) -> Record:
    """What follows an inbound call's end, in its transaction: its voicemail kept (a
    Recording, to be transcribed), the mail it calls for, `call_record` pushed after commit
    to the owner and to the number's members (their sockets, and their webhook and Matrix
    room when they turned those on: issue 57)."""
    kept = None
    if recording:
        kept = Recording.objects.create(
            call=call,
            kind=RecordingKind.VOICEMAIL,
            name=recording,
            seconds=None if seconds is None else round(seconds, 2),
            transcript_status=transcript_status_for(recording=recording, seconds=seconds),
        )
    # Read back as every read of the history reads it (history.records): the phone that took
    # it is its answered leg's, the voicemail the one just kept.
    record = record_by_id(call.pk)
    if kept is not None and kept.transcript_status == TranscriptStatus.PENDING:
        schedule_transcription(kept.pk)
    owner = User.objects.get(pk=number.owner_id)
    call_mail_queue(record=record, owner=owner)
    event = call_record_event(record=record)
    events.send_to_user_on_commit(user_id=number.owner_id, event=event)
    events.send_to_members_on_commit(members=number_members_heard(number_id=number.pk), event=event)
    metrics.count_on_commit(metrics.inbound_calls, record.status)
    return record


def _number_lock(number: Number) -> None:
    """Lock the number's row, as number_delete locks it: a record and its counter land before
    a deletion of the number (which then takes both) or not at all; NotFound when it is gone."""
    if not _number_exists_locked(number):
        raise NotFound()


def _number_exists_locked(number: Number) -> bool:
    return Number.objects.select_for_update(no_key=True).filter(pk=number.pk).exists()


def _caller_checked(caller_num: str) -> str:
    caller = ANONYMOUS_CALLER if caller_num == ANONYMOUS_CALLER else e164_possible(caller_num)
    if caller is None:
        # The sentence the blocklist's caller_num field says (core.fields.CallerNumberField).
        raise invalid_fields({"caller_num": [e164_problem(caller_num, assigned=False)]})
    return caller


def _duration_check(status: str, duration) -> None:
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


def call_record_counters_recount() -> list[Drift]:
    """Recount every history counter from the history's calls and correct the ones that
    drifted (safe beside live writers: core.counters.counters_recount); return the
    corrections."""
    drift = counters_recount(history_calls(), OutcomeCounter, ["owner_id", "number_id", "outcome"])
    # Said in the history's words: an outcome is a record's status.
    return [replace(d, key={WORDS.get(k, k): v for k, v in d.key.items()}) for d in drift]


# --- voicemail -----------------------------------------------------------------------------
def _voicemail(record_pk) -> Recording | None:
    """The call's voicemail, locked (while it has a file)."""
    return (
        Recording.objects.select_for_update()
        .filter(call_id=record_pk, kind=RecordingKind.VOICEMAIL)
        .exclude(name="")
        .first()
    )


def call_record_recording_delete(*, record: Record) -> None:
    """Delete a record's voicemail (the record stays, with recording_url null); NotFound when
    it has none (never had, or already deleted). The file goes once the change commits."""
    with transaction.atomic():
        locked = _voicemail(record.pk)
        if locked is None:
            raise NotFound()
        Recording.objects.filter(pk=locked.pk).update(**NO_MESSAGE)
        recordings_delete_on_commit([locked.name])
        voicemail_mail_withdraw(record=record)
    record.recording, record.recording_seconds = "", None
    record.transcript, record.transcript_confidence, record.transcript_status = "", None, None


def call_record_mark_heard(*, record: Record) -> None:
    """The owner heard this message in the mailbox: it is no longer new."""
    Recording.objects.filter(call_id=record.pk, kind=RecordingKind.VOICEMAIL).update(heard=True)
    record.heard = True


ORPHAN_AGE = timedelta(hours=1)


def call_record_recordings_purge(*, now: datetime | None = None) -> int:
    """Delete the voicemail of records older than VOICEMAIL_RETENTION_DAYS (the records stay,
    with recording_url null), and recording files that no recording names and that are older
    than an hour (their call was deleted with its owner); return the files deleted."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.VOICEMAIL_RETENTION_DAYS)
    expired = Recording.objects.filter(kind=RecordingKind.VOICEMAIL, created_at__lt=cutoff).exclude(
        name=""
    )
    deleted = recordings_purge(expired, settle=lambda rows: rows.update(**NO_MESSAGE))
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
        named = set(Recording.objects.filter(name__in=chunk).values_list("name", flat=True))
        for name in chunk:
            if name not in named and storage.get_modified_time(name) < now - ORPHAN_AGE:
                orphans.append(name)
    recordings_delete_on_commit(orphans)
    return len(orphans)


def history_erase(*, user: User) -> None:
    """Account deletion (core.userdata): every inbound call of `user` and their counters, and
    their voicemail files once the deletion commits. Inside the deletion's transaction."""
    voicemail = Recording.objects.filter(kind=RecordingKind.VOICEMAIL, call__owner=user)
    names = list(voicemail.exclude(name="").values_list("name", flat=True))
    Call.objects.filter(owner=user, direction="inbound").delete()
    OutcomeCounter.objects.filter(owner=user).delete()
    recordings_delete_on_commit(names)
