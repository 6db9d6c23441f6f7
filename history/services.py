"""How call records get written (record_inbound_call, the only way) and the blocklist."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import User
from history.models import BlockedCaller, CallRecord, CallStatus
from realtime import events
from relay.errors import InvalidRequest, NotFound
from relay.fields import to_ms
from relay.phone import e164_possible
from virtual_numbers.models import Number
from virtual_numbers.services import number_get_owned

BLOCKLIST_MAX_PER_NUMBER = 500
DURATION_MAX_SECONDS = 7 * 24 * 3600


def caller_clean(raw, *, field: str = "caller_num") -> str:
    caller = e164_possible(raw)
    if caller is None:
        raise InvalidRequest(
            f"{field} must be a phone number in E.164 form, like +447700900123.",
            fields={field: ["Not an E.164 phone number."]},
        )
    return caller


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
    recorded as `blocked` with duration 0 whatever was passed.
    """
    caller = caller_clean(caller_num)
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
        record = CallRecord.objects.create(
            number=number,
            owner_id=number.owner_id,
            caller_num=caller,
            status=status,
            duration=duration,
            created_at=at or timezone.now(),
        )
        events.send_to_user_on_commit(user_id=number.owner_id, event=call_record_event(record))
    return record


# --- blocklist -----------------------------------------------------------------------------
def blocklist_of(*, user: User, number_id: str) -> list[BlockedCaller]:
    number = number_get_owned(user=user, number_id=number_id)
    return list(number.blocked_callers.order_by("created_at", "id"))


def blocked_caller_add(
    *, user: User, number_id: str, caller_num: str
) -> tuple[BlockedCaller, bool]:
    """Block a caller on one of the user's numbers. Returns (entry, created); idempotent."""
    caller = caller_clean(caller_num)
    with transaction.atomic():
        number = number_get_owned(user=user, number_id=number_id, lock=True)
        existing = BlockedCaller.objects.filter(number=number, caller_num=caller).first()
        if existing is not None:
            return existing, False
        if number.blocked_callers.count() >= BLOCKLIST_MAX_PER_NUMBER:
            raise InvalidRequest(
                f"A number can block at most {BLOCKLIST_MAX_PER_NUMBER} callers.",
                code="blocklist_full",
            )
        try:
            with transaction.atomic():
                return BlockedCaller.objects.create(number=number, caller_num=caller), True
        except IntegrityError:
            return BlockedCaller.objects.get(number=number, caller_num=caller), False


def blocked_caller_remove(*, user: User, number_id: str, caller_num: str) -> None:
    """Unblock a caller; NotFound if the caller is not blocked on that number."""
    caller = caller_clean(caller_num)
    number = number_get_owned(user=user, number_id=number_id)
    deleted, _ = BlockedCaller.objects.filter(number=number, caller_num=caller).delete()
    if not deleted:
        raise NotFound()
