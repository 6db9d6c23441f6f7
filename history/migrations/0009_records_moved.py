"""Every call record, its voicemail and the history's counters, from history's tables into the
call ledger (issue 54): the history becomes a read of the ledger (history.records). In
batches of BATCH records, each committed on its own, so it can run while the release before
this one still serves.

`sync` makes the ledger equal to history's tables, and runs again in 0010, in the transaction
that drops them. A record keeps its id as its call's: a record whose inbound call the ledger
holds under another id (a call the release before this one recorded after its first copy)
moves the call to the record's id, with its events, legs and recordings. A record with no
call (recorded by hand, or before the ledger) becomes an ended inbound call. The record is the
history's truth: the call takes its caller, time, outcome, duration and who answered; the
leg that took a forwarded call, and the voicemail (a Recording, heard or not, its file and
transcript), are written if missing.
"""

import uuid
from datetime import timedelta

from django.db import migrations, transaction

BATCH = 500
NAMESPACE = uuid.UUID("5b0c2f5e-54d1-4c56-9b7e-2a7c1f0e0054")
END_STATES = {"answered": "completed", "missed": "no_answer", "blocked": "busy"}
TRANSCRIPT = ("transcript", "transcript_confidence", "transcript_status",
              "transcribe_lease_until", "transcribe_attempts")  # fmt: skip


def _answered_by(record) -> str | None:
    """Who answered, in the ledger's words (calls.models.AnsweredBy)."""
    if record.status != "answered" or record.answered_by is None:
        return None
    if record.answered_by == "forward":
        return "browser" if record.forwarded_to == "browser" else "person"
    return record.answered_by


def _rekeyed(apps, schema_editor, old_pk, new_pk) -> None:
    """The call `old_pk` and everything of it, under `new_pk`, in the caller's transaction
    (foreign keys are checked at its commit)."""
    quote = schema_editor.connection.ops.quote_name
    with schema_editor.connection.cursor() as cursor:
        for model in ("Call", "CallEvent", "Leg", "Recording"):
            table = quote(apps.get_model("calls", model)._meta.db_table)
            column = "id" if model == "Call" else "call_id"
            cursor.execute(
                f"UPDATE {table} SET {column} = %s WHERE {column} = %s",  # noqa: S608 - names
                [new_pk.hex if schema_editor.connection.vendor == "sqlite" else new_pk,
                 old_pk.hex if schema_editor.connection.vendor == "sqlite" else old_pk],
            )  # fmt: skip


def _written(record, Call, CallEvent) -> None:
    """A record with no call: an ended inbound call, with the events of its way."""
    answered = record.status == "answered"
    end = END_STATES[record.status]
    ways = ["ringing", *(["in_progress"] if answered else []), end]
    Call.objects.create(
        id=record.pk, direction="inbound", owner_id=record.owner_id, number_id=record.number_id,
        call_id="", to=record.number.number, message="", caller_id=record.caller_num,
        sip_call_id=record.sip_call_id, status=end, last_seq=len(ways),
        created_at=record.created_at, updated_at=record.created_at,
        ringing_at=record.created_at, answered_at=record.created_at if answered else None,
        ended_at=record.created_at + timedelta(seconds=record.duration),
        duration=record.duration, outcome=record.status, answered_by=_answered_by(record),
    )  # fmt: skip
    CallEvent.objects.bulk_create(
        CallEvent(call_id=record.pk, seq=seq, status=way, at=record.created_at)
        for seq, way in enumerate(ways, start=1)
    )


def _leg_kept(record, call, Leg) -> None:
    """The leg that took a forwarded call, written if the ledger has none."""
    by = _answered_by(record)
    if by not in ("person", "browser"):
        return
    kind = "browser" if by == "browser" else "sip"
    took = Leg.objects.filter(call_id=record.pk, kind=kind, answered_at__isnull=False)
    if by == "person":
        took = took.filter(role="forward_target", phone=record.forwarded_to or "")
    if took.exists():
        return
    Leg.objects.create(
        call_id=record.pk, owner_id=record.owner_id, kind=kind, role="forward_target",
        phone=record.forwarded_to if kind == "sip" else "",
        user_id=record.owner_id if kind == "browser" else None, status="ended",
        created_at=record.created_at, answered_at=call.answered_at or record.created_at,
        ended_at=call.ended_at, duration=record.duration,
    )  # fmt: skip


def _voicemail_kept(record, Recording) -> None:
    """The record's voicemail as the call's Recording (heard or not, with or without its
    file), written again."""
    if not (record.recording or record.heard or record.transcript_status):
        return
    Recording.objects.update_or_create(
        call_id=record.pk,
        kind="voicemail",
        defaults={
            "id": uuid.uuid5(NAMESPACE, f"voicemail:{record.pk}"),
            "name": record.recording,
            "seconds": record.recording_seconds,
            "created_at": record.created_at,
            "heard": record.heard,
            **{name: getattr(record, name) for name in TRANSCRIPT},
        },
    )


def _sync_batch(apps, schema_editor, records) -> None:
    Call = apps.get_model("calls", "Call")
    CallEvent = apps.get_model("calls", "CallEvent")
    Leg = apps.get_model("calls", "Leg")
    Recording = apps.get_model("calls", "Recording")
    pks = {record.pk for record in records}
    held = set(Call.objects.filter(pk__in=pks).values_list("pk", flat=True))
    sip_ids = {r.sip_call_id: r.pk for r in records if r.sip_call_id and r.pk not in held}
    elsewhere = Call.objects.filter(direction="inbound", sip_call_id__in=sip_ids)
    for old_pk, sip_call_id in list(elsewhere.values_list("pk", "sip_call_id")):
        _rekeyed(apps, schema_editor, old_pk, sip_ids[sip_call_id])
        held.add(sip_ids[sip_call_id])
    for record in records:
        if record.pk not in held:
            _written(record, Call, CallEvent)
    calls = Call.objects.in_bulk(pks)
    for record in records:
        call = calls[record.pk]
        call.outcome, call.answered_by = record.status, _answered_by(record)
        call.caller_id, call.created_at = record.caller_num, record.created_at
        call.duration, call.number_id = record.duration, record.number_id
        call.status = END_STATES[record.status]
        call.save(update_fields=["outcome", "answered_by", "caller_id", "created_at",
                                 "duration", "number_id", "status"])  # fmt: skip
        _leg_kept(record, call, Leg)
        _voicemail_kept(record, Recording)


def _counters(apps) -> None:
    """The history's counters, copied as they are."""
    OutcomeCounter = apps.get_model("calls", "OutcomeCounter")
    OldCounter = apps.get_model("history", "CallRecordCounter")
    OutcomeCounter.objects.all().delete()
    OutcomeCounter.objects.bulk_create(
        OutcomeCounter(
            owner_id=old.owner_id, number_id=old.number_id, outcome=old.status, count=old.count
        )
        for old in OldCounter.objects.iterator()
    )


def sync(apps, schema_editor) -> None:
    """The ledger made equal to history's tables, BATCH records per transaction (one
    transaction in all inside a caller's, as 0010 is)."""
    CallRecord = apps.get_model("history", "CallRecord")
    Call = apps.get_model("calls", "Call")
    after = None
    while True:
        batch = CallRecord.objects.select_related("number").order_by("pk")
        if after is not None:
            batch = batch.filter(pk__gt=after)
        batch = list(batch[:BATCH])
        if not batch:
            break
        with transaction.atomic():
            _sync_batch(apps, schema_editor, batch)
        after = batch[-1].pk
    with transaction.atomic():
        _counters(apps)
        # Inbound calls whose number was deleted: their history went with it.
        Call.objects.filter(direction="inbound", number__isnull=True).delete()


class Migration(migrations.Migration):
    atomic = False  # each batch commits on its own (sync)

    dependencies = [
        ("history", "0008_transcripts"),
        ("calls", "0004_history_read_of_the_ledger"),
        ("telephony", "0007_inbound_calls_moved_to_the_ledger"),
    ]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop, elidable=False)]
