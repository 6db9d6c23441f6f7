"""What the counters behind `total` must equal: a COUNT over the rows, key by key. Computed
with the ORM, independently of core.counters, so the tests do not check it against itself."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.db.models import Count

from calls.models import Call, CallCounter, OutcomeCounter
from history.records import history_calls

HISTORY_KEY = ("owner_id", "number_id", "outcome")
CALLS_KEY = ("owner_id", "status")

# Tests whose writers must really run at once, each on its own connection.
CONCURRENT_WRITERS = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="concurrent writers need PostgreSQL: SQLite runs one writer at a time",
)


def _counted(model, key) -> dict:
    return {row[:-1]: row[-1] for row in model.objects.values_list(*key, "count") if row[-1]}


def _rows(rows, key) -> dict:
    grouped = rows.values(*key).annotate(rows=Count("pk")).order_by()
    return {tuple(g[k] for k in key): g["rows"] for g in grouped}


def history_counted() -> dict:
    return _counted(OutcomeCounter, HISTORY_KEY)


def history_rows() -> dict:
    return _rows(history_calls(), HISTORY_KEY)


def calls_counted() -> dict:
    return _counted(CallCounter, CALLS_KEY)


def calls_rows() -> dict:
    return _rows(Call.objects.filter(direction="outbound"), CALLS_KEY)


def assert_totals_exact() -> None:
    """Every counter equals the COUNT of its rows (zero counters may stay behind)."""
    assert history_counted() == history_rows()
    assert calls_counted() == calls_rows()


def run_together(functions) -> list:
    """Run the callables at once, each in a thread of its own (so each on a database
    connection of its own), released together by a barrier; return what each returned or
    raised, in order. Connections are closed as the threads end."""
    barrier = threading.Barrier(len(functions))

    def run(function):
        try:
            barrier.wait(timeout=30)
            return function()
        except Exception as exc:  # noqa: BLE001 - reported to the test, which judges it
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(functions)) as pool:
        return list(pool.map(run, functions))
