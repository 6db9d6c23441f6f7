"""Every outbound call, with its events, recordings and counters, from realtime's tables into
the ledger (issue 54), in batches of BATCH calls, each committed on its own: the copy holds no
lock for long, so it can run while the release before this one still serves.

`sync` makes the ledger equal to realtime's tables: a call copied before and changed since is
written again, its events numbered again (1, 2, 3 ... in the order of their time). It runs
here, and once more in realtime's 0010, in the transaction that drops the old tables, so a
call the old release wrote or moved meanwhile is not lost. Calls keep their ids, so a queued
task, a hook or a client that names a call still finds it.
"""

from django.db import migrations, transaction

BATCH = 500
CALL_FIELDS = [
    "owner_id", "call_id", "to", "message", "script", "language", "caller_id",
    "status_callback", "rtc_offer", "status", "created_at", "updated_at", "dialing_at",
    "ringing_at", "answered_at", "ended_at", "duration", "talk_limit", "failure_reason",
    "step_deadline", "recoveries",
]  # fmt: skip


def _calls(old_calls, Call):
    """The ledger's rows of a batch of realtime's calls, events not yet counted."""
    return [
        Call(
            id=old.pk,
            direction="outbound",
            number_id=old.from_number_id,
            sip_call_id=old.provider_call_id,
            **{name: getattr(old, name) for name in CALL_FIELDS},
        )
        for old in old_calls
    ]


def _events(old_events, CallEvent) -> tuple[list, dict]:
    """The ledger's events of a batch's calls (`old_events` in each call's order), numbered,
    and the last number of each call."""
    events, last = [], {}
    for old in old_events:
        seq = last[old.call_id] = last.get(old.call_id, 0) + 1
        events.append(
            CallEvent(
                call_id=old.call_id,
                seq=seq,
                status=old.status,
                at=old.at,
                detail=old.detail,
                kind=old.event,
                data=old.data,
            )  # fmt: skip
        )
    return events, last


def _sync_batch(apps, old_calls) -> None:
    Call = apps.get_model("calls", "Call")
    CallEvent = apps.get_model("calls", "CallEvent")
    OldEvent = apps.get_model("realtime", "CallEvent")
    pks = [old.pk for old in old_calls]
    calls = _calls(old_calls, Call)
    old_events = OldEvent.objects.filter(call_id__in=pks).order_by("call_id", "at", "id")
    events, last = _events(old_events, CallEvent)
    for call in calls:
        call.last_seq = last.get(call.pk, 0)
    copied = set(Call.objects.filter(pk__in=pks).values_list("pk", flat=True))
    Call.objects.bulk_create([call for call in calls if call.pk not in copied])
    Call.objects.bulk_update(
        [call for call in calls if call.pk in copied],
        ["number_id", "sip_call_id", "last_seq", *CALL_FIELDS],
    )
    CallEvent.objects.filter(call_id__in=pks).delete()
    CallEvent.objects.bulk_create(events)


def _sync_rest(apps) -> None:
    """Recordings and counters: few rows, copied whole (counters as they are)."""
    Recording = apps.get_model("calls", "Recording")
    CallCounter = apps.get_model("calls", "CallCounter")
    OldRecording = apps.get_model("realtime", "CallRecording")
    OldCounter = apps.get_model("realtime", "CallRequestCounter")
    kept = set(Recording.objects.values_list("pk", flat=True))
    Recording.objects.bulk_create(
        Recording(
            id=old.pk,
            call_id=old.call_id,
            name=old.name,
            seconds=old.seconds,
            created_at=old.created_at,
        )  # fmt: skip
        for old in OldRecording.objects.iterator()
        if old.pk not in kept
    )
    CallCounter.objects.all().delete()
    CallCounter.objects.bulk_create(
        CallCounter(owner_id=old.owner_id, status=old.status, count=old.count)
        for old in OldCounter.objects.iterator()
    )


def sync(apps, schema_editor=None) -> None:
    """The ledger made equal to realtime's tables, BATCH calls per transaction (one
    transaction in all inside a caller's, as realtime's 0010 is)."""
    OldCall = apps.get_model("realtime", "CallRequest")
    after = None
    while True:
        batch = OldCall.objects.order_by("pk")
        if after is not None:
            batch = batch.filter(pk__gt=after)
        batch = list(batch[:BATCH])
        if not batch:
            break
        with transaction.atomic():
            _sync_batch(apps, batch)
        after = batch[-1].pk
    with transaction.atomic():
        _sync_rest(apps)


class Migration(migrations.Migration):
    atomic = False  # each batch commits on its own (sync)

    dependencies = [
        ("calls", "0001_initial"),
        ("realtime", "0009_browser_calls"),
    ]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop, elidable=False)]
