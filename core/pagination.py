"""Offset paging as the history API defines it, shared by every paged list."""

from dataclasses import dataclass


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
