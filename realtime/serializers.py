from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from calls.models import AnsweredAs, MachineDetection, TranscriptStatus
from calls.states import CallState
from core import parsing
from core.fields import (
    BoundedTextField,
    DialableNumberField,
    E164Field,
    MillisecondsField,
    PublicUrlField,
)
from core.pagination import PageOutput, PageParameters, PageQuery
from core.webrtc import offer_problem
from virtual_numbers.serializers import SipUriField
from voiceapps.verbs import (
    MUST_BE_A_STRING,
    TEXT_MAX,
    LanguageField,
    MessageField,
    ScriptField,
)

STATUS_FILTERS = [*CallState.values, "all"]


class CallsQuery(PageQuery):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all")


class CallListParameters(PageParameters):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all", required=False)


CALL_ID_MAX = 64
MESSAGE_MAX = TEXT_MAX


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": CALL_ID_MAX,
        "pattern": r"^[^\u0000-\u001f\u007f-\u009f]+$",
    }
)
class CallIdField(BoundedTextField):
    """The client's id for a call: 1-64 characters, no control characters, kept as sent."""

    default_error_messages = MUST_BE_A_STRING

    def __init__(self, **kwargs):
        super().__init__(max_length=CALL_ID_MAX, rule=parsing.id_problem, **kwargs)


class CallSubmitInput(serializers.Serializer):
    # A `call` frame and the body of POST /api/calls: one shape, checked here for both (a
    # comment, not a docstring, which the schema would publish). Whether `from` is one of the
    # caller's numbers is the service's to decide.

    default_error_messages = {"invalid": "The body must be a JSON object."}

    callId = CallIdField()  # noqa: N815
    to = DialableNumberField(help_text="E.164, e.g. +442079460123")
    message = MessageField(required=False, help_text="the text to say; or `script`, not both")
    script = ScriptField(
        required=False, help_text="verbs to run (docs/voice-apps.md); or `message`, not both"
    )
    language = LanguageField(required=False, help_text="the voice; default TTS_DEFAULT_LANGUAGE")
    statusCallback = PublicUrlField(  # noqa: N815
        required=False,
        help_text="where this call's call_status events are POSTed, signed; a public address",
    )
    machineDetection = serializers.ChoiceField(  # noqa: N815
        choices=MachineDetection.values,
        required=False,
        allow_null=True,  # null means none, as leaving it out does
        help_text="`detect`: report who answered (`answeredBy`); `leave_message`: also say "
        "the message on a machine after its beep, and hang up on a fax (docs/telephony.md)",
    )

    def get_fields(self):
        # "from" is a Python keyword, so it cannot be declared as a class attribute.
        fields = super().get_fields()
        fields["from"] = E164Field(
            required=False,
            allow_null=True,  # null means the default (to_internal_value); the schema says so
            help_text="one of your numbers (E.164); default: your oldest",
        )
        return fields

    def to_internal_value(self, data):
        if isinstance(data, dict) and data.get("from") is None:
            # `"from": null` means the default, as leaving it out does.
            data = {key: value for key, value in data.items() if key != "from"}
        if isinstance(data, dict) and ("message" in data) == ("script" in data):
            # Exactly one of the two; named on both keys, so a client sees where.
            problem = (
                "Give `message` or `script`, not both."
                if "message" in data
                else "Give `message` (the text to say) or `script` (verbs to run)."
            )
            errors = {"message": [problem]}
            try:
                super().to_internal_value(data)
            except serializers.ValidationError as refused:
                errors = {**refused.detail, **errors}
            raise serializers.ValidationError(errors)
        values = super().to_internal_value(data)
        if "message" in values:
            values["script"] = None
        return values


class OfferField(serializers.CharField):
    """A browser's WebRTC offer (core.webrtc): each refusal says what is wrong."""

    def to_internal_value(self, data):
        problem = offer_problem(data)
        if problem is not None:
            raise serializers.ValidationError(problem[0].upper() + problem[1:] + ".")
        return data


class BrowserCallInput(serializers.Serializer):
    # The `rtc_offer` frame: a call from the browser (docs/websocket.md), checked as a call
    # frame's callId, to and from are; its audio is the tab's, so it has no message.

    default_error_messages = {"invalid": "The frame must be a JSON object."}

    callId = CallIdField()  # noqa: N815
    to = DialableNumberField(help_text="E.164, e.g. +442079460123")
    sdp = OfferField(help_text="the tab's WebRTC offer, with every ICE candidate in it")

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = E164Field(required=False, allow_null=True)
        return fields

    def to_internal_value(self, data):
        if isinstance(data, dict) and data.get("from") is None:
            data = {key: value for key, value in data.items() if key != "from"}
        values = super().to_internal_value(data)
        values.update(message="", script=None, rtc_offer=values.pop("sdp"))
        return values


class CallAckOutput(serializers.Serializer):
    # The `call_ack` frame and the body of POST /api/calls: the call as it was stored.
    type = serializers.CharField(default="call_ack")
    callId = serializers.CharField(source="call_id")  # noqa: N815
    call = serializers.UUIDField(source="pk", help_text="Relay's own id of the call")
    status = serializers.ChoiceField(choices=CallState.values)


class CallStatusOutput(serializers.Serializer):
    # The `call_status` frame (docs/websocket.md): `seq` numbers the call's events from 1,
    # `duration` once the call has one, and `reason` only when the call ended for a reason.
    type = serializers.CharField(default="call_status")
    callId = serializers.CharField(source="call_id")  # noqa: N815
    call = serializers.UUIDField(source="pk", help_text="Relay's own id of the call")
    seq = serializers.IntegerField(source="last_seq", help_text="the event's number, from 1")
    status = serializers.ChoiceField(choices=CallState.values)
    ts = MillisecondsField(source="updated_at")
    duration = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(source="failure_reason")
    answeredBy = serializers.ChoiceField(  # noqa: N815
        source="answered_as",
        choices=AnsweredAs.values,
        allow_null=True,
        help_text="who answered, once machine detection has decided",
    )

    def to_representation(self, instance):
        frame = super().to_representation(instance)
        if frame["duration"] is None:
            del frame["duration"]
        if not frame["reason"]:
            del frame["reason"]
        if frame["answeredBy"] is None:
            del frame["answeredBy"]
        return frame


class CallEventOutput(serializers.Serializer):
    # A state the call went through; or, with `event`, what a verb of its script reported
    # at that state (docs/voice-apps.md), its fields (verb, result, limit) beside it.
    seq = serializers.IntegerField(help_text="the event's number: 1, 2, 3 ... with no gap")
    status = serializers.ChoiceField(choices=CallState.values)
    at = MillisecondsField()
    detail = serializers.CharField()
    event = serializers.CharField(
        required=False, help_text="gathered, recorded, dialed, hook_failed or limit"
    )
    verb = serializers.CharField(required=False)
    result = serializers.DictField(required=False)

    def to_representation(self, instance):
        row = {
            "seq": instance.seq,
            "status": instance.status,
            "at": self.fields["at"].to_representation(instance.at),
            "detail": instance.detail,
        }
        if instance.kind:
            row |= {"event": instance.kind, **(instance.data or {})}
        return row


class CallOutput(serializers.Serializer):
    callId = serializers.CharField(source="call_id")  # noqa: N815
    call = serializers.UUIDField(source="pk", help_text="Relay's own id of the call")
    to = serializers.CharField()
    message = serializers.CharField()
    status = serializers.ChoiceField(choices=CallState.values)
    duration = serializers.IntegerField(allow_null=True, help_text="seconds")
    reason = serializers.CharField(source="failure_reason")
    createdAt = MillisecondsField(source="created_at")  # noqa: N815
    updatedAt = MillisecondsField(source="updated_at")  # noqa: N815
    endedAt = MillisecondsField(source="ended_at", allow_null=True)  # noqa: N815
    machineDetection = serializers.CharField(  # noqa: N815
        source="machine_detection", allow_null=True, help_text="as asked for; null: none"
    )
    answeredBy = serializers.CharField(  # noqa: N815
        source="answered_as",
        allow_null=True,
        help_text="human, machine, fax or unknown, once machine detection has decided",
    )

    def get_fields(self):
        # "from" is a Python keyword, so it cannot be declared as a class attribute; it
        # follows endedAt, before the fields added since and any field a subclass adds.
        fields = {}
        for name, field in super().get_fields().items():
            fields[name] = field
            if name == "endedAt":
                fields["from"] = serializers.CharField(source="caller_id")
        return fields


class CallRecordingOutput(serializers.Serializer):
    id = serializers.UUIDField(help_text="GET /api/calls/:callId/recordings/:id downloads it")
    duration = serializers.FloatField(source="seconds", help_text="seconds")
    createdAt = MillisecondsField(source="created_at")  # noqa: N815
    transcript = serializers.CharField(help_text="what was said, once transcribed; else empty")
    transcriptConfidence = serializers.FloatField(  # noqa: N815
        source="transcript_confidence", allow_null=True, help_text="0 to 1, once transcribed"
    )
    transcriptStatus = serializers.ChoiceField(  # noqa: N815
        source="transcript_status",
        choices=TranscriptStatus.values,
        allow_null=True,
        help_text="pending, done, failed or off (the engine off, or past TRANSCRIBE_MAX_SECONDS)",
    )


class CallDetailOutput(CallOutput):
    recordings = CallRecordingOutput(
        source="recordings.all", many=True, help_text="what its script's `record` verbs kept"
    )
    script = ScriptField(
        read_only=True, allow_null=True, help_text="the verbs the call runs; null: its message"
    )
    timeline = CallEventOutput(source="events.all", many=True)


class CallListOutput(PageOutput):
    total_help = "the calls matching the filter, on any page"
    calls = CallOutput(many=True, source="records")


extend_schema_field(OpenApiTypes.INT)(MillisecondsField)


TRANSFER_TO_PROBLEM = (
    "A phone number in E.164 form, like +441134960123, or a SIP URI (sip: or sips:, then "
    "user@host)."
)


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "description": "a phone number (E.164) or a SIP URI",
        "example": "+441134960456",
    }
)
class TransferTargetField(serializers.Field):
    """Who a call is handed on to: a phone number Relay may dial (DialableNumberField's
    rules) or a SIP URI (SipUriField's), normalised."""

    default_error_messages = {"invalid": TRANSFER_TO_PROBLEM}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        if data[:4].lower() == "sip:" or data[:5].lower() == "sips:":
            return SipUriField().run_validation(data)
        return DialableNumberField().run_validation(data)

    def to_representation(self, value):
        return value


class CallTransferInput(serializers.Serializer):
    to = TransferTargetField(help_text="who the caller is handed on to")


class CallTransferOutput(serializers.Serializer):
    call = serializers.UUIDField(source="pk", help_text="Relay's own id of the call")
    to = serializers.CharField(help_text="who the caller is being handed on to")
    status = serializers.CharField(help_text='"transferring": the agent holding the call was told')
