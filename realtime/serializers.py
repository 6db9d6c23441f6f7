from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import E164Field, MillisecondsField
from core.pagination import PageParameters, PageQuery
from realtime.models import CallState

STATUS_FILTERS = [*CallState.values, "all"]


class CallsQuery(PageQuery):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all")


class CallListParameters(PageParameters):
    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all", required=False)


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "pattern": r"^[^\u0000-\u001f\u007f-\u009f]+$",
    }
)
class CallIdField(serializers.CharField):
    pass


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": 1000, "pattern": r"\S"})
class MessageField(serializers.CharField):
    pass


class CallSubmitInput(serializers.Serializer):
    """Documented shape only: the service validates the raw values itself, exactly as it does
    for the WebSocket `call` frame, so both paths answer the same errors."""

    callId = CallIdField()  # noqa: N815
    to = E164Field(help_text="E.164, e.g. +442079460123")
    message = MessageField()

    def get_fields(self):
        # "from" is a Python keyword, so it cannot be declared as a class attribute.
        fields = super().get_fields()
        fields["from"] = E164Field(
            required=False, help_text="one of your numbers (E.164); default: your oldest"
        )
        return fields


class CallAckOutput(serializers.Serializer):
    type = serializers.CharField(default="call_ack")
    callId = serializers.CharField()  # noqa: N815
    status = serializers.ChoiceField(choices=CallState.values)


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


class CallListOutput(serializers.Serializer):
    calls = CallOutput(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


extend_schema_field(OpenApiTypes.INT)(MillisecondsField)
