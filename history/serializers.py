from django.conf import settings
from rest_framework import serializers

from core.fields import MillisecondsField
from history.models import CallStatus

STATUS_FILTERS = [*CallStatus.values, "all"]
# SQL OFFSET is a 64-bit integer (PostgreSQL bigint, SQLite integer); no table comes near.
OFFSET_MAX = 10**18 - 1


class HistoryQuery(serializers.Serializer):
    """Query parameters: strings on the wire, so parsed here with explicit messages."""

    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all")
    limit = serializers.CharField(required=False)
    offset = serializers.CharField(required=False)
    number_id = serializers.UUIDField(required=False)

    @staticmethod
    def _int(value: str, name: str, minimum: int) -> int:
        if not value.isascii() or not value.isdigit():
            raise serializers.ValidationError({name: [f"Must be an integer >= {minimum}."]})
        digits = value.lstrip("0") or "0"
        if len(digits) > len(str(OFFSET_MAX)):
            return OFFSET_MAX + 1  # without converting it: int() refuses past 4,300 digits
        number = int(digits)
        if number < minimum:
            raise serializers.ValidationError({name: [f"Must be an integer >= {minimum}."]})
        return number

    def validate(self, attrs):
        limit = self._int(attrs.get("limit", "50"), "limit", 1)
        attrs["limit"] = min(limit, settings.HISTORY_MAX_LIMIT)  # clamped, and echoed as applied
        attrs["offset"] = self._int(attrs.get("offset", "0"), "offset", 0)
        if attrs["offset"] > OFFSET_MAX:
            raise serializers.ValidationError({"offset": [f"Must be at most {OFFSET_MAX}."]})
        return attrs


class CallRecordOutput(serializers.Serializer):
    id = serializers.UUIDField()
    number_id = serializers.UUIDField()
    caller_num = serializers.CharField()
    status = serializers.ChoiceField(choices=CallStatus.values)
    duration = serializers.IntegerField(help_text="seconds")
    created_at = MillisecondsField()
    number = serializers.CharField(source="number.number")
    alias = serializers.CharField(source="number.alias")


class HistoryOutput(serializers.Serializer):
    history = CallRecordOutput(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


class HistoryParameters(serializers.Serializer):
    """The query parameters as documented (HistoryQuery parses them from strings)."""

    status = serializers.ChoiceField(choices=STATUS_FILTERS, default="all", required=False)
    limit = serializers.IntegerField(
        min_value=1, default=50, required=False, help_text="1-200; larger values are clamped"
    )
    offset = serializers.IntegerField(min_value=0, max_value=OFFSET_MAX, default=0, required=False)


class HistoryListParameters(HistoryParameters):
    number_id = serializers.UUIDField(required=False, help_text="one of your numbers")
