"""OpenAPI helpers: every operation documents its error responses with the one error shape."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import is_list_serializer
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from core.errors import ErrorCode

ErrorOutput = inline_serializer(
    name="Error",
    fields={
        "error": serializers.CharField(help_text="Message for people."),
        "code": serializers.ChoiceField(
            choices=[code.value for code in ErrorCode],
            help_text="Stable machine-readable code (docs/errors.md).",
        ),
        "fields": serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            required=False,
            help_text="Per-field messages (validation errors only).",
        ),
    },
)


def _description(status: int) -> str:
    """The registry's codes for `status`, each with its meaning."""
    return "\n".join(
        f"- `{code.value}`: {code.meaning}" for code in ErrorCode if code.status == status
    )


# `{"success": true}`: the body of an operation that has nothing else to return. (A comment:
# drf-spectacular would publish a docstring as the component's description.)
class SuccessOutput(serializers.Serializer):
    success = serializers.BooleanField()


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error responses of an operation, each described by the registry's codes."""
    return {s: OpenApiResponse(ErrorOutput, description=_description(s)) for s in statuses}


AUTHED = (401, 405, 415, 429)
OPEN = (400, 405, 415, 429)


class RelayAutoSchema(AutoSchema):
    """Every Relay response is a JSON object (lists come wrapped: `{"numbers": [...]}`), so
    a ViewSet's `list` action is not documented as a bare array, as drf-spectacular would
    guess from the action's name."""

    def _is_list_view(self, serializer=None) -> bool:
        if serializer is None:
            serializer = self.get_response_serializers()
        if isinstance(serializer, dict) and serializer:
            serializer = serializer[min(serializer, key=str)]
        return is_list_serializer(serializer)
