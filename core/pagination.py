"""Offset paging as the history API defines it, shared by every paged list: the query it
reads, the parameters it documents, and the page it answers."""

from dataclasses import dataclass

from django.conf import settings
from rest_framework import serializers

# SQL OFFSET is a 64-bit integer (PostgreSQL bigint, SQLite integer); no table comes near.
OFFSET_MAX = 10**18 - 1
DEFAULT_LIMIT = 50


class PageQuery(serializers.Serializer):
    """`limit` and `offset` as the query string carries them (strings), parsed with explicit
    messages: limit >= 1, clamped to HISTORY_MAX_LIMIT and echoed as applied; offset >= 0.
    A list adds its own filters in a subclass."""

    limit = serializers.CharField(required=False)
    offset = serializers.CharField(required=False)

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
        limit = self._int(attrs.get("limit", str(DEFAULT_LIMIT)), "limit", 1)
        attrs["limit"] = min(limit, settings.HISTORY_MAX_LIMIT)  # clamped, and echoed as applied
        attrs["offset"] = self._int(attrs.get("offset", "0"), "offset", 0)
        if attrs["offset"] > OFFSET_MAX:
            raise serializers.ValidationError({"offset": [f"Must be at most {OFFSET_MAX}."]})
        return attrs


class PageParameters(serializers.Serializer):
    """The paging parameters as documented (PageQuery parses them from strings)."""

    limit = serializers.IntegerField(
        min_value=1,
        default=DEFAULT_LIMIT,
        required=False,
        help_text="1-200; larger values are clamped",
    )
    offset = serializers.IntegerField(min_value=0, max_value=OFFSET_MAX, default=0, required=False)


@dataclass(frozen=True)
class Page:
    records: list
    total: int
    limit: int
    offset: int

    def body(self, key: str, serializer_class) -> dict:
        """`{key: [...], "total", "limit", "offset"}`: the response of a paged list."""
        return {
            key: serializer_class(self.records, many=True).data,
            "total": self.total,
            "limit": self.limit,
            "offset": self.offset,
        }
