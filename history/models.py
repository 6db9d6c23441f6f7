"""The history keeps no call of its own: a record is a read of the call ledger (history.records).
What it keeps is the vocabulary of its API, and the slots its transcriptions run in."""

from django.db import models

from calls.models import Outcome, TranscriptStatus

__all__ = ["ANONYMOUS_CALLER", "AnsweredBy", "CallStatus", "TranscriptStatus", "TranscriptionSlot"]


# A record's `status` is its call's outcome (calls.models.Outcome): answered, missed, blocked.
CallStatus = Outcome


class AnsweredBy(models.TextChoices):
    """Who took an answered call, in the history's words: one of the owner's phones or tabs
    (forwarding), voicemail, or the number's voice application (voiceapps)."""

    FORWARD = "forward", "Forwarded"
    VOICEMAIL = "voicemail", "Voicemail"
    APP = "app", "Voice app"


CALL_STATUS_VALUES = CallStatus.values  # the schema's CallRecordStatusEnum
# The caller of a call whose caller ID was withheld or is not a phone number.
ANONYMOUS_CALLER = "anonymous"


class TranscriptionSlot(models.Model):
    """One of TRANSCRIBE_CONCURRENCY places a transcription runs in, across every worker: a
    transcription takes a free slot (one conditional UPDATE) and gives it back when done;
    a slot whose worker died is free again once its lease has passed."""

    slot = models.PositiveSmallIntegerField(primary_key=True)
    record = models.UUIDField(null=True, blank=True, help_text="the recording being transcribed")
    lease_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"transcription slot {self.slot}"
