"""How call records get written: record_inbound_call, the only way."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from core import events
from core.counters import Drift, counters_add, counters_recount
from core.errors import InvalidRequest, NotFound
from core.fields import to_ms
from core.phone import e164_possible
from history.models import CallRecord, CallRecordCounter, CallStatus
from virtual_numbers.models import BlockedCaller, Number

DURATION_MAX_SECONDS = 7 * 24 * 3600


def call_record_event(record: CallRecord) -> dict:
    """The `call_record` frame pushed to the owner's sockets (fields as in the history API)."""
    return {
        "type": "call_record",
        "id": str(record.id),
        "number_id": str(record.number_id),
        "caller_num": record.caller_num,
        "status": record.status,
        "duration": record.duration,
        "created_at": to_ms(record.created_at),
        "number": record.number.number,
        "alias": record.number.alias,
    }


def record_inbound_call(
    *,
    number: Number,
    caller_num: str,
    status: str,
    duration: int,
    at: datetime | None = None,
) -> CallRecord:
    """Record an inbound call on `number` and push `call_record` to its owner after commit.

    Checks the caller (E.164), status (answered|missed|blocked) and duration (whole seconds,
    0..one week); raises InvalidRequest otherwise. A caller on the number's blocklist is
    recorded as `blocked` with duration 0 whatever was passed. NotFound when the number has
    been deleted meanwhile. The owner's counters (`total` of the history list) move in the
    record's transaction.
    """
    caller = e164_possible(caller_num)
    if caller is None:
        raise InvalidRequest(
            "caller_num must be a phone number in E.164 form, like +447700900123.",
            fields={"caller_num": ["Not an E.164 phone number."]},
        )
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
    if BlockedCaller.objects.filter(number=number, caller_num=caller).exists():
        status, duration = CallStatus.BLOCKED, 0
    with transaction.atomic():
        # The number's row, locked as number_delete locks it: a record and its counter land
        # before a deletion of the number (which then takes both) or not at all.
        if not Number.objects.select_for_update(no_key=True).filter(pk=number.pk).exists():
            raise NotFound()
        record = CallRecord.objects.create(
            number=number,
            owner_id=number.owner_id,
            caller_num=caller,
            status=status,
            duration=duration,
            created_at=at or timezone.now(),
        )
        call_record_counters_add(records=[record])
        events.send_to_user_on_commit(user_id=number.owner_id, event=call_record_event(record))
    return record


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
