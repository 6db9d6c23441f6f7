"""Every inbound call and every leg dialled for a call, from telephony's tables into the call
ledger (calls.Call with direction `inbound`, calls.Leg; issue 54), in batches of BATCH calls,
each committed on its own: the copy holds no lock for long, so it can run while the release
before this one still serves.

`sync` makes the ledger equal to telephony's tables: a call copied before and changed since
(answered, recorded) is written again, its events numbered again. It runs here, and once more
in 0007, in the transaction that drops the old tables, so a call the old release wrote or moved
meanwhile is not lost. An inbound call already recorded keeps its history record's id, so that
both name the call alike; one not yet recorded keeps the id its first copy gave it.
"""

import uuid
from datetime import timedelta

from django.db import migrations, transaction

BATCH = 500
NAMESPACE = uuid.UUID("5b0c2f5e-54d1-4c56-9b7e-2a7c1f0e0054")
END_STATES = {"answered": "completed", "missed": "no_answer", "blocked": "busy"}
ANSWERED_BY = {"voicemail": "voicemail", "app": "app", "forward": "person"}


def _answered_by(old, record) -> str | None:
    """Who answered, in the ledger's words (calls.models.AnsweredBy)."""
    if record is not None:
        if record.status != "answered":
            return None
        if record.forwarded_to == "browser":
            return "browser"
        return ANSWERED_BY.get(record.answered_by or "", "voicemail")
    if old.answered_at is None:
        return None
    if old.answered_by_app:
        return "app"
    if old.forwarded_to:
        return "browser" if old.forwarded_to == "browser" else "person"
    return "voicemail"


def _ended(old, record) -> tuple[str, str | None, int | None, object]:
    """The call's state, outcome, duration and end."""
    if record is None and not old.recorded:
        return ("in_progress" if old.answered_at else "ringing"), None, None, None
    if record is not None:
        outcome, duration = record.status, record.duration
    else:
        outcome, duration = ("answered" if old.answered_at else "missed"), 0
    ended_at = (old.answered_at or old.started_at) + timedelta(seconds=duration)
    return END_STATES[outcome], outcome, duration, ended_at


def _call_and_events(old, record, pk, Call, CallEvent):
    status, outcome, duration, ended_at = _ended(old, record)
    moments = [("ringing", old.started_at)]
    if old.answered_at is not None and (outcome is None or outcome == "answered"):
        moments.append(("in_progress", old.answered_at))
    if ended_at is not None:
        moments.append((status, ended_at))
    call = Call(
        id=pk,
        direction="inbound",
        owner_id=old.number.owner_id,
        number_id=old.number_id,
        call_id="",
        to=old.number.number,
        message="",
        caller_id=old.caller_num,
        sip_call_id=old.sip_call_id,
        status=status,
        last_seq=len(moments),
        created_at=old.started_at,
        updated_at=moments[-1][1],
        ringing_at=old.started_at,
        answered_at=old.answered_at if outcome in (None, "answered") else None,
        ended_at=ended_at,
        duration=duration,
        outcome=outcome,
        answered_by=_answered_by(old, record),
        step_deadline=None if ended_at else old.deadline,
    )
    events = [
        CallEvent(call_id=pk, seq=seq, status=state, at=at)
        for seq, (state, at) in enumerate(moments, start=1)
    ]
    return call, events


def _sync_batch(apps, olds, ids: dict) -> None:
    """A batch of inbound calls: their ledger rows and events, written again; `ids` learns
    each old row's call id."""
    Call = apps.get_model("calls", "Call")
    CallEvent = apps.get_model("calls", "CallEvent")
    CallRecord = apps.get_model("history", "CallRecord")
    sip_ids = [old.sip_call_id for old in olds]
    copied = dict(
        Call.objects.filter(direction="inbound", sip_call_id__in=sip_ids).values_list(
            "sip_call_id", "pk"
        )
    )
    records = {r.sip_call_id: r for r in CallRecord.objects.filter(sip_call_id__in=sip_ids)}
    calls, events = [], []
    for old in olds:
        record = records.get(old.sip_call_id)
        pk = copied.get(old.sip_call_id) or (
            record.pk if record is not None else uuid.uuid5(NAMESPACE, str(old.pk))
        )
        ids[old.pk] = pk
        call, its_events = _call_and_events(old, record, pk, Call, CallEvent)
        calls.append(call)
        events.extend(its_events)
    fields = [f.name for f in Call._meta.concrete_fields if f.name != "id"]
    Call.objects.bulk_create([c for c in calls if c.sip_call_id not in copied])
    Call.objects.bulk_update([c for c in calls if c.sip_call_id in copied], fields)
    CallEvent.objects.filter(call_id__in=[c.pk for c in calls]).delete()
    CallEvent.objects.bulk_create(events)


def _leg(old, call_pk, Leg):
    if old.ended_at is not None:
        status = "ended"
    else:
        status = "answered" if old.answered_at is not None else "ringing"
    return Leg(
        call_id=call_pk,
        owner_id=old.user_id,
        kind="sip",
        role="forward_target" if old.call_id is not None and old.dial == 0 else "dial_target",
        dial=old.dial,
        phone=old.target,
        sip_call_id=old.sip_call_id,
        status=status,
        created_at=old.created_at,
        answered_at=old.answered_at,
        ended_at=old.ended_at,
        duration=old.duration,
        talk_limit=old.talk_limit,
    )


def _sync_legs(apps, ids: dict) -> None:
    """Every leg written again (no leg of the new release exists before it runs): each
    ForwardLeg, and a browser leg for each call a tab took."""
    Leg = apps.get_model("calls", "Leg")
    OldLeg = apps.get_model("telephony", "ForwardLeg")
    InboundCall = apps.get_model("telephony", "InboundCall")
    Call = apps.get_model("calls", "Call")
    Leg.objects.all().delete()
    after = 0
    while batch := list(OldLeg.objects.filter(pk__gt=after).order_by("pk")[:BATCH]):
        with transaction.atomic():
            Leg.objects.bulk_create(
                _leg(old, ids[old.call_id] if old.call_id else old.request_id, Leg)
                for old in batch
                if old.request_id is not None or old.call_id in ids
            )
        after = batch[-1].pk
    taken = InboundCall.objects.filter(forwarded_to="browser", answered_at__isnull=False)
    for old in taken.iterator():
        call = Call.objects.filter(pk=ids.get(old.pk)).first()
        if call is not None:
            Leg.objects.create(
                call_id=call.pk,
                owner_id=call.owner_id,
                kind="browser",
                role="forward_target",
                user_id=call.owner_id,
                status="ended" if call.ended_at else "answered",
                created_at=old.answered_at,
                answered_at=old.answered_at,
                ended_at=call.ended_at,
                duration=call.duration,
            )


def sync(apps, schema_editor=None) -> None:
    """The ledger made equal to telephony's tables, BATCH calls per transaction (one
    transaction in all inside a caller's, as 0007 is)."""
    InboundCall = apps.get_model("telephony", "InboundCall")
    ids: dict = {}
    after = 0
    while True:
        batch = InboundCall.objects.filter(pk__gt=after).select_related("number")
        batch = list(batch.order_by("pk")[:BATCH])
        if not batch:
            break
        with transaction.atomic():
            _sync_batch(apps, batch, ids)
        after = batch[-1].pk
    _sync_legs(apps, ids)


class Migration(migrations.Migration):
    atomic = False  # each batch commits on its own (sync)

    dependencies = [
        ("telephony", "0005_dial_legs_of_ledger_calls"),
        ("calls", "0003_inbound_calls_and_legs"),
        ("history", "0008_transcripts"),
    ]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop, elidable=False)]
