"""Serializer fields that refuse the wrong JSON type instead of coercing it.

DRF's CharField turns 123 into "123" and IntegerField turns "7" into 7; an API that documents
a type should answer 400 when handed another one.
"""

from datetime import datetime

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be an integer."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


def to_ms(value: datetime | None) -> int | None:
    """A datetime as integer milliseconds since the Unix epoch (the API's timestamp)."""
    if value is None:
        return None
    return int(value.timestamp() * 1000)


@extend_schema_field(OpenApiTypes.INT)
class MillisecondsField(serializers.Field):
    """Read-only datetime rendered as integer epoch milliseconds."""

    def __init__(self, **kwargs):
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value):
        return to_ms(value)


# --- documented constraints ------------------------------------------------------------------
# Fields whose OpenAPI schema states the rule the service enforces, so that generated clients
# (and schemathesis) know what is accepted. Validation itself stays in the services.
# NUL and lone surrogates are refused in every string of every body and frame (core/parsing.py);
# the patterns say so for generated clients.
NO_CONTROL = r"\u0000-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff"
TEXT_PATTERN = r"^[^\u0000\ud800-\udfff]*$"
MESSAGE_PATTERN = r"^[^\u0000\ud800-\udfff]*[^\s\u0000\ud800-\udfff][^\u0000\ud800-\udfff]*$"
CALL_ID_PATTERN = rf"^[^{NO_CONTROL}]+$"
ALIAS_PATTERN = rf"^[^{NO_CONTROL}]*[^\s{NO_CONTROL}][^{NO_CONTROL}]*$"
PIN_PATTERN = r"^[0-9]{4,8}$"
E164_PATTERN = r"^\+[1-9][0-9]{6,14}$"


# Each field's OpenAPI schema states its rule; the field is a plain StrictCharField.
@extend_schema_field({"type": "string", "minLength": 1, "maxLength": 64, "pattern": ALIAS_PATTERN})
class AliasField(StrictCharField):
    pass


@extend_schema_field({"type": "string", "pattern": PIN_PATTERN})
class PinField(StrictCharField):
    pass


@extend_schema_field({"type": "string", "pattern": E164_PATTERN})
class E164Field(StrictCharField):
    pass


@extend_schema_field({"type": "string", "pattern": TEXT_PATTERN})
class TextField(StrictCharField):
    pass
