import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class CallStatus(models.TextChoices):
    ANSWERED = "answered", "Answered"
    MISSED = "missed", "Missed"
    BLOCKED = "blocked", "Blocked"


class AnsweredBy(models.TextChoices):
    """Who took an answered call: one of the owner's phones (forwarding), voicemail, or the
    number's voice application (voiceapps)."""

    FORWARD = "forward", "Forwarded"
    VOICEMAIL = "voicemail", "Voicemail"
    APP = "app", "Voice app"


class TranscriptStatus(models.TextChoices):
    """Where a message's transcript stands (history.tasks): null on a record without one."""

    PENDING = "pending", "Pending"  # stored, waiting for the worker
    DONE = "done", "Done"
    FAILED = "failed", "Failed"  # the engine could not read it; the mail went without
    OFF = "off", "Off"  # TRANSCRIBE_ENGINE=off, or longer than TRANSCRIBE_MAX_SECONDS


CALL_STATUS_VALUES = CallStatus.values  # the schema's CallRecordStatusEnum
# The caller of a call whose caller ID was withheld or is not a phone number.
ANONYMOUS_CALLER = "anonymous"


class CallRecord(models.Model):
    """An inbound call on one of a user's numbers. Written by record_inbound_call, and in bulk
    by seed_history (manage.py), each counting what it writes (call_record_counters_add)."""

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
    # The SIP Call-ID of the call, for calls that came over SIP: one record per Call-ID,
    # however often the trunk re-sends the INVITE. Empty for records made by hand.
    # Database defaults too: bulk loads (seed_history's INSERT ... SELECT) name only the
    # columns they fill.
    sip_call_id = models.CharField(max_length=255, blank=True, default="", db_default="")
    # The voicemail message, a WAV file in the `recordings` storage; empty when there is none
    # (never recorded, deleted by its owner, or purged after VOICEMAIL_RETENTION_DAYS).
    recording = models.CharField(max_length=255, blank=True, default="", db_default="")
    recording_seconds = models.FloatField(null=True, blank=True)
    heard = models.BooleanField(
        default=False, db_default=False, help_text="played to the owner in the mailbox"
    )
    # The message's automatic transcript (a rough draft: history.transcription), made by the
    # worker after the record commits; deleted with the message.
    transcript = models.TextField(blank=True, default="", db_default="")
    transcript_confidence = models.FloatField(null=True, blank=True, help_text="0 to 1")
    transcript_status = models.CharField(  # noqa: DJ001 - null is the API's "no message"
        max_length=7, choices=TranscriptStatus.choices, null=True, blank=True
    )
    # The worker's hold on a transcription under way, and how many were started: a worker
    # that died mid-way leaves the lease to expire, and the sweep queues it again.
    transcribe_lease_until = models.DateTimeField(null=True, blank=True)
    transcribe_attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    # Who answered an answered call (null: not answered, or recorded before Relay knew), and
    # the owner's phone that took a forwarded one.
    answered_by = models.CharField(max_length=9, choices=AnsweredBy.choices, null=True, blank=True)  # noqa: DJ001 - null is the API's "nobody"
    forwarded_to = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001 - null is the API's "no phone"

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
            # the retention purge: records that still hold a recording, oldest first
            models.Index(
                fields=["created_at"],
                condition=~models.Q(recording=""),
                name="callrecord_recording_age",
            ),
            # the transcription sweep: messages still waiting for their transcript
            models.Index(
                fields=["transcribe_lease_until"],
                condition=models.Q(transcript_status=TranscriptStatus.PENDING),
                name="callrecord_transcript_pending",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=CallStatus.values), name="callrecord_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(duration__gte=0), name="callrecord_duration_non_negative"
            ),
            models.CheckConstraint(
                condition=models.Q(answered_by__isnull=True)
                | models.Q(status=CallStatus.ANSWERED, answered_by__in=AnsweredBy.values),
                name="callrecord_answered_by_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(forwarded_to__isnull=True)
                | models.Q(answered_by=AnsweredBy.FORWARD),
                name="callrecord_forwarded_to_only_forwarded",
            ),
            models.CheckConstraint(
                condition=models.Q(transcript_status__isnull=True)
                | models.Q(transcript_status__in=TranscriptStatus.values),
                name="callrecord_transcript_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(transcript_confidence__isnull=True)
                | models.Q(transcript_confidence__gte=0, transcript_confidence__lte=1),
                name="callrecord_transcript_confidence_0_1",
            ),
            models.UniqueConstraint(
                fields=["sip_call_id"],
                condition=~models.Q(sip_call_id=""),
                name="callrecord_unique_sip_call_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.caller_num} -> {self.number_id} ({self.status})"

    @property
    def recording_url(self) -> str | None:
        """Where the owner fetches the voicemail: a path of the API, as the record's other
        links are, or None when there is none."""
        return f"/api/history/{self.id}/recording" if self.recording else None


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


class TranscriptionSlot(models.Model):
    """One of TRANSCRIBE_CONCURRENCY places a transcription runs in, across every worker: a
    transcription takes a free slot (one conditional UPDATE) and gives it back when done;
    a slot whose worker died is free again once its lease has passed."""

    slot = models.PositiveSmallIntegerField(primary_key=True)
    record = models.UUIDField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"transcription slot {self.slot}"
