"""Serializer fields that refuse the wrong JSON type instead of coercing it.

DRF's CharField turns 123 into "123" and IntegerField turns "7" into 7; an API that documents
a type should answer 400 when handed another one.
"""

from datetime import datetime

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


class MillisecondsField(serializers.Field):
    """Read-only datetime rendered as integer epoch milliseconds."""

    def __init__(self, **kwargs):
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value):
        return to_ms(value)
