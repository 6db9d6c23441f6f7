"""Exact per-owner totals kept beside the rows they count, for lists whose `total` must not be
a COUNT over the owner's rows.

A counter model has a few key columns (owner, status, ...), a `count` column and a unique
constraint on the key columns. Its app's writers call `counters_add` in the same transaction
as the rows they insert, delete or move, so a committed state always has counters equal to
the rows; a list sums at most a handful of counter rows. `counters_drift` finds, and
`counters_recount` corrects, any difference (a write that bypassed the services).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, models, transaction
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


@dataclass(frozen=True)
class Drift:
    """A counter that differs from its rows: `key` (column values), what the rows number,
    and what the counter said."""

    key: dict
    rows: int
    counted: int


def counters_drift(rows, counter: type[models.Model], keys: list[str]) -> list[Drift]:
    """Every key whose counter differs from a COUNT of `rows` (a model's rows, or the rows of
    a queryset: the ones its counters count) grouped by `keys`.

    One statement (a UNION ALL of the grouped rows and the counters), so on PostgreSQL it
    reads one snapshot: writers change rows and counters in one transaction, so a write in
    flight is either wholly in it or wholly out of it, and the differences it finds are
    drift, never a write half seen. It reads every row of `model`: an operator's tool.
    """
    quote = connection.ops.quote_name
    if isinstance(rows, type):
        rows = rows._default_manager.all()
    row_columns = [quote(f.column) for f in _key_fields(rows.model, keys)]
    source, params = rows.order_by().values(*keys).query.sql_with_params()
    counter_columns = [quote(f.column) for f in _key_fields(counter, keys)]
    names = [f"k{i}" for i in range(len(keys))]
    rows_select = ", ".join(f"{c} AS {n}" for c, n in zip(row_columns, names, strict=True))
    counter_select = ", ".join(f"{c} AS {n}" for c, n in zip(counter_columns, names, strict=True))
    grouped = ", ".join(names)
    count = quote(counter._meta.get_field(COUNT).column)
    sql = (
        f"SELECT {grouped}, SUM(actual), SUM(counted) FROM ("  # noqa: S608 - names from _meta
        f"SELECT {rows_select}, COUNT(*) AS actual, 0 AS counted "
        f"FROM ({source}) r GROUP BY {', '.join(row_columns)} "
        f"UNION ALL SELECT {counter_select}, 0 AS actual, {count} AS counted "
        f"FROM {quote(counter._meta.db_table)}"
        f") t GROUP BY {grouped} HAVING SUM(actual) <> SUM(counted) ORDER BY {grouped}"
    )
    fields = _key_fields(counter, keys)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    drift = []
    for row in found:
        key = {
            name: field.to_python(value)
            for name, field, value in zip(keys, fields, row[: len(keys)], strict=True)
        }
        drift.append(Drift(key=key, rows=int(row[-2]), counted=int(row[-1])))
    return drift


def counters_recount(rows, counter: type[models.Model], keys: list[str]) -> list[Drift]:
    """Correct every counter of `counter` that differs from `rows` (as counters_drift); return
    what was corrected.

    Safe beside live writers: the drift is read in one snapshot and corrected by adding the
    difference (not by overwriting), and a writer's own change adds to it in its own
    transaction, so the two commute. Two recounts at once would add the same difference
    twice; on PostgreSQL a transaction-level advisory lock makes the second wait and then
    find nothing (SQLite's IMMEDIATE transactions already take one writer at a time).
    """
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", [counter._meta.db_table]
                )
        drift = counters_drift(rows, counter, keys)
        counters_add(counter, [(d.key, d.rows - d.counted) for d in drift])
    return drift
