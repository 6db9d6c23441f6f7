"""Database idioms every app shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Aggregate, TextField

Row = TypeVar("Row")


def create_unless_taken(create: Callable[..., Row], /, **fields) -> Row | None:
    """`create(**fields)` (a manager's `create`, or `create_user`) in a savepoint; None when
    the database refuses the row (IntegrityError: a unique row a concurrent request took a
    moment ago). The savepoint keeps the caller's own transaction usable after a refusal,
    so the caller may read the winner's row, try another value, or raise its own error."""
    try:
        with transaction.atomic():
            return create(**fields)
    except IntegrityError:
        return None


class JSONList(Aggregate):
    """A group's values as the text of one JSON array, in no particular order (PostgreSQL's
    json_agg, SQLite's json_group_array): the rows of a subquery carried in one column of
    the outer query, so that a read of users brings each one's numbers along. `json.loads`
    reads it; NULL when the group is empty."""

    function = "JSON_GROUP_ARRAY"
    output_field = TextField()

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = self.as_sql(compiler, connection, function="JSON_AGG", **extra_context)
        return f"({sql})::text", params
