"""Paging as the history API defines it, shared by every paged list: the query it reads,
the parameters it documents, the rows of a page and the page it answers.

Lists are ordered newest first, `created_at` desc then `id` (a UUID) desc. A page is reached
by `offset`, or by `before`, the opaque `nextCursor` of the page before it: the position
(created_at, id) of that page's last row. With `before`, the page holds rows strictly after
that position in the list's order, so rows added meanwhile (newer) never shift, repeat or
hide the rest; `offset` then skips rows from the cursor on (docs/decisions.md).
"""

import base64
import binascii
import re
import struct
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

# SQL OFFSET is a 64-bit integer (PostgreSQL bigint, SQLite integer); no table comes near.
OFFSET_MAX = 10**18 - 1
DEFAULT_LIMIT = 50


# --- the cursor ----------------------------------------------------------------------------
# 8 bytes of microseconds since the epoch (signed, big-endian) and the 16 bytes of the id,
# in URL-safe base64: 24 bytes make exactly 32 characters, with no padding and no spare bits,
# so every string of 32 such characters is one cursor and no cursor has two spellings.
_CURSOR = struct.Struct(">q16s")
CURSOR_PATTERN = r"^[A-Za-z0-9_-]{32}$"
_CURSOR_TEXT = re.compile(r"[A-Za-z0-9_-]{32}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)
CURSOR_MESSAGE = "Must be the nextCursor of an earlier page."


@dataclass(frozen=True)
class Cursor:
    """A position in a newest-first list: just after the row (created_at, id)."""

    created_at: datetime
    id: uuid.UUID

    @classmethod
    def after(cls, row) -> "Cursor":
        return cls(created_at=row.created_at, id=row.id)

    def encode(self) -> str:
        micros = (self.created_at - _EPOCH) // timedelta(microseconds=1)
        return base64.urlsafe_b64encode(_CURSOR.pack(micros, self.id.bytes)).decode("ascii")

    @classmethod
    def decode(cls, text: str) -> "Cursor | None":
        """The cursor `text` spells, or None for anything that is not one. A time beyond
        what a row can hold is clamped to the first or last one: the same position."""
        if not isinstance(text, str) or not _CURSOR_TEXT.fullmatch(text):
            return None
        try:
            micros, raw_id = _CURSOR.unpack(base64.urlsafe_b64decode(text))
        except (binascii.Error, struct.error):
            return None
        try:
            created_at = _EPOCH + timedelta(microseconds=micros)
        except OverflowError:
            created_at = _LAST if micros > 0 else _FIRST
        return cls(created_at=created_at, id=uuid.UUID(bytes=raw_id))

    def older(self) -> Q:
        """Rows after this position in (created_at desc, id desc) order. The bare
        `created_at <= t` bounds the index range scan; the OR only sorts out the ties."""
        return Q(created_at__lte=self.created_at) & (
            Q(created_at__lt=self.created_at) | Q(created_at=self.created_at, id__lt=self.id)
        )


def page_rows(
    rows: QuerySet, *, limit: int, offset: int, before: Cursor | None, fetch=None
) -> tuple[list, str | None]:
    """One page of `rows`, newest first, from `before` (when given) and `offset`, and the
    cursor of the page that follows (None when no row follows). Reads `limit` + 1 rows: the
    one past the page only says whether there is more. `fetch(ids)`, when given, reads the
    rows of a page past an offset (anything with `id`) in place of `rows.filter(id__in=ids)`.

    Past an offset, the positions come first (an index-only walk over the skipped entries)
    and then only the page's rows with their joins: joining every skipped row cost four times
    as much at offset 500,000 (docs/benchmarks.md). A row deleted between the two reads is
    left out of its page.
    """
    ordered = rows.order_by("-created_at", "-id")
    if before is not None:
        ordered = ordered.filter(before.older())
    window = slice(offset, offset + limit + 1)
    if offset:
        keys = list(ordered.values_list("created_at", "id")[window])
        ids = [i for _, i in keys[:limit]]
        found = {row.id: row for row in (fetch(ids) if fetch else rows.filter(id__in=ids))}
        page = [found[i] for _, i in keys[:limit] if i in found]
        last = Cursor(*keys[limit - 1]) if len(keys) > limit else None
    else:
        found = list(ordered[window])
        page = found[:limit]
        last = Cursor.after(page[-1]) if len(found) > limit else None
    return page, last.encode() if last else None


# --- the query string ----------------------------------------------------------------------
class _QueryText(serializers.Field):
    # A query-string value as it came, for a parser that judges it whole (a cursor is right
    # or wrong as a whole; a CharField would trim it and word NUL and surrogates apart).

    def to_internal_value(self, data):
        return data


class PageQuery(serializers.Serializer):
    """`limit`, `offset` and `before` as the query string carries them (strings), parsed
    with explicit messages: limit >= 1, clamped to HISTORY_MAX_LIMIT and echoed as applied;
    offset >= 0; before a cursor (or absent). A list adds its own filters in a subclass."""

    limit = serializers.CharField(required=False)
    offset = serializers.CharField(required=False)
    before = _QueryText(required=False)

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
        if "before" in attrs:
            attrs["before"] = Cursor.decode(attrs["before"])
            if attrs["before"] is None:
                raise serializers.ValidationError({"before": [CURSOR_MESSAGE]})
        return attrs


@extend_schema_field(
    {"type": "string", "pattern": CURSOR_PATTERN, "minLength": 32, "maxLength": 32}
)
class CursorField(serializers.CharField):
    # A `nextCursor` as the schema documents it; PageQuery decodes it. (Comments, not a
    # docstring: drf-spectacular would publish a docstring in the schema.)

    def __init__(self, **kwargs):
        super().__init__(min_length=32, max_length=32, **kwargs)


class PageParameters(serializers.Serializer):
    """The paging parameters as documented (PageQuery parses them from strings)."""

    limit = serializers.IntegerField(
        min_value=1,
        default=DEFAULT_LIMIT,
        required=False,
        help_text="1-200; larger values are clamped",
    )
    offset = serializers.IntegerField(
        min_value=0,
        max_value=OFFSET_MAX,
        default=0,
        required=False,
        help_text="rows to skip (counted from `before` when it is given)",
    )
    before = CursorField(
        required=False,
        help_text="the `nextCursor` of the previous page: rows strictly older than its last row",
    )


class NextCursorField(serializers.CharField):
    # `nextCursor` in a list's response: present on every page, null on the last.

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault(
            "help_text", "`before` for the next page; null when no row follows this page"
        )
        super().__init__(**kwargs)


class PageOutput(serializers.Serializer):
    # The answer of a paged list, rendered from a Page: the page's rows under the name a subclass
    # declares (`history`, `calls`, each with source="records"), then `total` (`total_help` says
    # what it counts), `limit`, `offset` and `nextCursor`. (Comments, not a docstring:
    # drf-spectacular would publish a docstring in the schema.)

    total_help = "the rows matching the filters, on any page"
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    nextCursor = NextCursorField(source="next_cursor")  # noqa: N815

    def get_fields(self):
        fields = super().get_fields()  # the envelope first, then the subclass's rows
        fields["total"].help_text = self.total_help
        envelope = list(PageOutput._declared_fields)
        rows = [name for name in fields if name not in envelope]
        return {name: fields[name] for name in [*rows, *envelope]}


@dataclass(frozen=True)
class Page:
    records: list
    total: int
    limit: int
    offset: int
    next_cursor: str | None = None
