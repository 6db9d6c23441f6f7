"""Exact per-owner totals kept beside the rows they count, for lists whose `total` must not be
a COUNT over the owner's rows.

A counter model has a few key columns (owner, status, ...), a `count` column and a unique
constraint on the key columns. Its app's writers call `counters_add` in the same transaction
as the rows they insert, delete or move, so a committed state always has counters equal to
the rows; a list sums at most a handful of counter rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection, models
from django.db.models import Sum
from django.db.models.functions import Coalesce

COUNT = "count"  # the counter column of every counter model


def _key_fields(model: type[models.Model], names: Iterable[str]) -> list[models.Field]:
    return [model._meta.get_field(name) for name in names]


def counters_add(model: type[models.Model], deltas: Iterable[tuple[dict, int]]) -> None:
    """Add each delta to the counter row at its key (a dict of key columns, e.g. `owner_id`),
    creating rows that do not exist yet: one INSERT ... ON CONFLICT DO UPDATE statement,
    atomic on PostgreSQL under concurrent writers and on SQLite.

    Deltas at the same key are summed and zero sums skipped (a move to the state it came
    from changes nothing). Rows are written in key order, so two transactions moving the
    same owner's counters lock them in the same order and cannot deadlock on them. Call it
    inside the transaction that writes the rows counted.
    """
    summed: dict[tuple, int] = defaultdict(int)
    names: tuple[str, ...] = ()
    for key, delta in deltas:
        names = names or tuple(sorted(key))
        if tuple(sorted(key)) != names:
            raise ValueError(f"counter keys differ: {sorted(key)} and {list(names)}")
        summed[tuple(key[name] for name in names)] += delta
    # Key order as text: a total order over UUIDs and strings alike, the same in every process.
    rows = sorted(
        ((values, delta) for values, delta in summed.items() if delta),
        key=lambda row: [str(value) for value in row[0]],
    )
    if not rows:
        return
    fields = _key_fields(model, names)
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(field.column) for field in fields)
    count = quote(model._meta.get_field(COUNT).column)
    placeholders = "(" + ", ".join(["%s"] * (len(fields) + 1)) + ")"
    params: list = []
    for values, delta in rows:
        params += [f.get_db_prep_value(v, connection) for f, v in zip(fields, values, strict=True)]
        params.append(delta)
    sql = (
        f"INSERT INTO {table} ({columns}, {count}) "  # noqa: S608 - names from _meta
        f"VALUES {', '.join([placeholders] * len(rows))} "
        f"ON CONFLICT ({columns}) DO UPDATE SET {count} = {table}.{count} + excluded.{count}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def counters_sum(queryset: models.QuerySet) -> int:
    """The sum of the counters in `queryset` (the owner's rows, filtered): 0 when none."""
    return queryset.aggregate(total=Coalesce(Sum(COUNT), 0))["total"]
