import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class CallStatus(models.TextChoices):
    ANSWERED = "answered", "Answered"
    MISSED = "missed", "Missed"
    BLOCKED = "blocked", "Blocked"


CALL_STATUS_VALUES = CallStatus.values  # the schema's CallRecordStatusEnum


class CallRecord(models.Model):
    """An inbound call on one of a user's numbers. Written only by record_inbound_call."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    number = models.ForeignKey("numbers.Number", on_delete=models.CASCADE, related_name="calls")
    # The number's owner, copied so that "this user's records, newest first" is one index
    # range scan instead of a join and a sort.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="call_records"
    )
    caller_num = models.CharField(max_length=16)
    status = models.CharField(max_length=8, choices=CallStatus.choices)
    duration = models.PositiveIntegerField(help_text="seconds")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "-created_at", "-id"], name="callrecord_owner_newest"),
            models.Index(
                fields=["owner", "status", "-created_at", "-id"], name="callrecord_owner_status"
            ),
            models.Index(fields=["number", "-created_at", "-id"], name="callrecord_number_newest"),
            models.Index(fields=["caller_num"], name="callrecord_caller"),
            # admin: all records newest first, and the date hierarchy's min/max
            models.Index(fields=["-created_at", "-id"], name="callrecord_newest"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=CallStatus.values), name="callrecord_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(duration__gte=0), name="callrecord_duration_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.caller_num} -> {self.number_id} ({self.status})"


class CallRecordCounter(models.Model):
    """How many CallRecords an owner has on one number in one status: `total` of the history
    list is a sum of at most 15 of these rows (5 numbers x 3 statuses), never a COUNT.

    Kept exact by record_inbound_call, in the record's own transaction; deleting a number or
    a user deletes its counters with its records (both CASCADE). `manage.py recount_totals`
    corrects any drift. No check that `count` >= 0: a counter that drifted must not make a
    call fail to be recorded; the recount finds it.
    """

    # No index of its own: the unique key below starts with the owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    number = models.ForeignKey("numbers.Number", on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=8, choices=CallStatus.choices)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # The upsert's conflict target, and the index of "this owner's counters".
            models.UniqueConstraint(
                fields=["owner", "number", "status"], name="callrecordcounter_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.number_id} {self.status}: {self.count}"
