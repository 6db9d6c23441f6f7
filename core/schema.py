"""OpenAPI helpers: every operation documents its error responses with the one error shape."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import is_list_serializer
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

ErrorOutput = inline_serializer(
    name="Error",
    fields={
        "error": serializers.CharField(help_text="Message for people."),
        "code": serializers.CharField(help_text="Stable machine-readable code."),
        "fields": serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            required=False,
            help_text="Per-field messages (validation errors only).",
        ),
    },
)

_DESCRIPTIONS = {
    400: "invalid_request: malformed JSON, a missing or wrong-typed field, or a bad value.",
    401: "not_authenticated / authentication_failed / invalid_credentials.",
    403: "pin_mismatch.",
    404: "not_found: unknown, or not the caller's.",
    405: "method_not_allowed.",
    409: "Conflict (email_taken, number_limit_reached, ...).",
    413: "Request body too large.",
    415: "unsupported_media_type: the body is not JSON.",
    429: "rate_limited or pin_locked; see Retry-After.",
    503: "Service unavailable (no_numbers_available, database_unavailable).",
}


# `{"success": true}`: the body of an operation that has nothing else to return. (A comment:
# drf-spectacular would publish a docstring as the component's description.)
class SuccessOutput(serializers.Serializer):
    success = serializers.BooleanField()


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    return {s: OpenApiResponse(ErrorOutput, description=_DESCRIPTIONS[s]) for s in statuses}


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
