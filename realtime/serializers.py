from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core import parsing
from core.fields import (
    BoundedTextField,
    DialableNumberField,
    E164Field,
    MillisecondsField,
    StrictCharField,
    WebhookUrlField,
)
from core.pagination import PageOutput, PageParameters, PageQuery
from realtime.languages import LANGUAGES
from realtime.models import CallState

STATUS_FILTERS = [*CallState.values, "all"]


class CallsQuery(PageQuery):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all")


class CallListParameters(PageParameters):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all", required=False)


CALL_ID_MAX = 64
MESSAGE_MAX = 1000
MUST_BE_A_STRING = {"required": "Must be a string.", "null": "Must be a string."}


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


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": MESSAGE_MAX, "pattern": r"\S"})
class MessageField(BoundedTextField):
    """The text to speak: 1-1000 characters, not only whitespace, kept as sent."""

    default_error_messages = MUST_BE_A_STRING

    def __init__(self, **kwargs):
        super().__init__(max_length=MESSAGE_MAX, rule=parsing.text_problem, **kwargs)


@extend_schema_field({"type": "string", "enum": sorted(LANGUAGES)})
class LanguageField(StrictCharField):
    """A voice of realtime.languages; the default is TTS_DEFAULT_LANGUAGE."""

    default_error_messages = {
        "language": "Not a language Relay speaks; use a code such as en, de, fr or cmn."
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in LANGUAGES:
            self.fail("language")
        return value


class CallSubmitInput(serializers.Serializer):
    # A `call` frame and the body of POST /api/calls: one shape, checked here for both (a
    # comment, not a docstring, which the schema would publish). Whether `from` is one of the
    # caller's numbers is the service's to decide.

    default_error_messages = {"invalid": "The body must be a JSON object."}

    callId = CallIdField()  # noqa: N815
    to = DialableNumberField(help_text="E.164, e.g. +442079460123")
    message = MessageField()
    language = LanguageField(required=False, help_text="the voice; default TTS_DEFAULT_LANGUAGE")
    statusCallback = WebhookUrlField(  # noqa: N815
        required=False, help_text="where this call's call_status events are POSTed, signed"
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
        return super().to_internal_value(data)


class CallAckOutput(serializers.Serializer):
    # The `call_ack` frame and the body of POST /api/calls: the call as it was stored.
    type = serializers.CharField(default="call_ack")
    callId = serializers.CharField(source="call_id")  # noqa: N815
    status = serializers.ChoiceField(choices=CallState.values)


class CallStatusOutput(serializers.Serializer):
    # The `call_status` frame (docs/websocket.md): `duration` once the call has one, and
    # `reason` only when the call ended for a reason.
    type = serializers.CharField(default="call_status")
    callId = serializers.CharField(source="call_id")  # noqa: N815
    status = serializers.ChoiceField(choices=CallState.values)
    ts = MillisecondsField(source="updated_at")
    duration = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(source="failure_reason")

    def to_representation(self, instance):
        frame = super().to_representation(instance)
        if frame["duration"] is None:
            del frame["duration"]
        if not frame["reason"]:
            del frame["reason"]
        return frame


class CallEventOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=CallState.values)
    at = MillisecondsField()
    detail = serializers.CharField()


class CallOutput(serializers.Serializer):
    callId = serializers.CharField(source="call_id")  # noqa: N815
    to = serializers.CharField()
    message = serializers.CharField()
    status = serializers.ChoiceField(choices=CallState.values)
    duration = serializers.IntegerField(allow_null=True, help_text="seconds")
    reason = serializers.CharField(source="failure_reason")
    createdAt = MillisecondsField(source="created_at")  # noqa: N815
    updatedAt = MillisecondsField(source="updated_at")  # noqa: N815
    endedAt = MillisecondsField(source="ended_at", allow_null=True)  # noqa: N815

    def get_fields(self):
        # "from" is a Python keyword, so it cannot be declared as a class attribute; it
        # follows endedAt, before any field a subclass adds.
        fields = {}
        for name, field in super().get_fields().items():
            fields[name] = field
            if name == "endedAt":
                fields["from"] = serializers.CharField(source="caller_id")
        return fields


class CallDetailOutput(CallOutput):
    timeline = CallEventOutput(source="events.all", many=True)


class CallListOutput(PageOutput):
    total_help = "the calls matching the filter, on any page"
    calls = CallOutput(many=True, source="records")


extend_schema_field(OpenApiTypes.INT)(MillisecondsField)
