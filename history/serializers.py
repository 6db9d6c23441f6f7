from rest_framework import serializers

from core.fields import MillisecondsField
from core.pagination import PageOutput, PageParameters, PageQuery
from history.models import AnsweredBy, CallStatus, TranscriptStatus

STATUS_FILTERS = [*CallStatus.values, "all"]


class HistoryQuery(PageQuery):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all")
    number_id = serializers.UUIDField(required=False)


class CallRecordOutput(serializers.Serializer):
    id = serializers.UUIDField()
    number_id = serializers.UUIDField()
    caller_num = serializers.CharField()
    status = serializers.ChoiceField(choices=CallStatus.values)
    duration = serializers.IntegerField(help_text="seconds")
    created_at = MillisecondsField()
    number = serializers.CharField(source="number.number")
    alias = serializers.CharField(source="number.alias")
    recording_url = serializers.CharField(
        allow_null=True,
        help_text="the voicemail (GET it for audio/wav), a path of this API; null: none",
    )
    recording_seconds = serializers.FloatField(allow_null=True, help_text="the voicemail's length")
    heard = serializers.BooleanField(help_text="the owner played it in the mailbox")
    answered_by = serializers.ChoiceField(
        choices=AnsweredBy.values,
        allow_null=True,
        help_text="who took an answered call: `forward` (one of the owner's phones) or "
        "`voicemail`; null for a call nobody answered (or recorded before Relay knew)",
    )
    forwarded_to = serializers.CharField(
        allow_null=True,
        help_text='the phone (E.164) or SIP URI that took a forwarded call, or "browser" '
        "when a console tab took it; else null",
    )
    transferred_to = serializers.CharField(
        allow_null=True,
        help_text="the phone (E.164) or SIP URI the person who took a forwarded call handed it "
        "on to (a blind transfer: their phone's REFER, the browser phone's Transfer, or POST "
        "/api/calls/:call/transfer), whether or not it was taken there (then voicemail "
        "answered, or for an attended transfer the phone had the caller back); null when it "
        "was not transferred",
    )
    ring_entry = serializers.IntegerField(
        allow_null=True,
        help_text="the index of the number's ring list entry that took a forwarded call, as "
        "the list was then; null otherwise (and for calls before ring lists)",
    )
    answered_member_id = serializers.UUIDField(
        allow_null=True,
        help_text="the user id of the person whose console tab or ring phone took a forwarded "
        "call (the owner or a member, by a member entry); null for a phone or SIP entry",
    )
    answered_member_email = serializers.CharField(
        allow_null=True, help_text="that person's address; null when answered_member_id is"
    )
    transcript = serializers.CharField(
        help_text="the message's automatic transcript, a rough draft that may be inaccurate; "
        'empty until transcript_status is "done" (and for a message that had no words)'
    )
    transcript_confidence = serializers.FloatField(
        allow_null=True, help_text="the engine's confidence in the transcript, 0 to 1; else null"
    )
    transcript_status = serializers.ChoiceField(
        choices=TranscriptStatus.values,
        allow_null=True,
        help_text="`pending` (the worker will transcribe it), `done`, `failed` (the engine "
        "could not read it), `off` (transcription off, or the message longer than "
        "TRANSCRIBE_MAX_SECONDS); null without a message",
    )


class HistoryOutput(PageOutput):
    total_help = "the records matching the filters, on any page"
    history = CallRecordOutput(many=True, source="records")


class HistoryParameters(PageParameters):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all", required=False)


class HistoryListParameters(HistoryParameters):
    number_id = serializers.UUIDField(
        required=False, help_text="one of your numbers, or one shared with you"
    )
