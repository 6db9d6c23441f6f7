"""Database idioms every app shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import IntegrityError, transaction

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
