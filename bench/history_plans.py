"""EXPLAIN ANALYZE of the history page for a user with 1,000,000 records, on PostgreSQL.

Usage: DATABASE_URL=postgres://postgres@127.0.0.1:5432/relay_bench \
       SECRET_KEY=bench .venv/bin/python bench/history_plans.py [--count 1000000]

Creates (or reuses) the database, loads the records with `seed_history`, and writes the
plans and timings into the "History query plans" section of docs/benchmarks.md.
"""

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from accounts.models import User  # noqa: E402
from history.records import history_calls  # noqa: E402

EMAIL = "bench-history@relay.example"
SECTION = "## History query plans"
DOC = ROOT / "docs" / "benchmarks.md"


def explain(sql: str, params: list) -> tuple[str, float]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        text = "\n".join(row[0] for row in cursor.fetchall())
    timing = float(re.search(r"Execution Time: ([\d.]+) ms", text).group(1))
    return text, timing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    args = parser.parse_args()
    assert connection.vendor == "postgresql", "run this against PostgreSQL"
    call_command("migrate", verbosity=0)
    user = User.objects.filter(email=EMAIL).first()
    if user is None:
        user = User.objects.create_user(email=EMAIL, password=None)
    have = history_calls().filter(owner=user).count()
    if have < args.count:
        started = time.monotonic()
        call_command("seed_history", "--email", EMAIL, "--count", str(args.count - have))
        print(f"loaded in {time.monotonic() - started:.1f}s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE calls_call")

    from core.pagination import Cursor
    from history.selectors import history_page, history_querysets
    from history.services import call_record_counters_recount

    for drift in call_record_counters_recount():  # rows loaded before the counters existed
        print(f"history counter corrected: {drift}")
    sections = []
    for status in (None, "missed"):
        deep = 500_000 if status is None else 250_000
        records, counters = history_querysets(user=user, status=status)
        ordered = records.order_by("-created_at", "-id")
        cursor = Cursor.after(ordered[deep - 1])
        for offset, before in ((0, None), (deep, None), (0, cursor)):
            page = ordered.filter(before.older()) if before else ordered
            # The walk to the page, as history_page runs it past an offset (then it fetches
            # the 50 rows by primary key; at offset 0 it joins the numbers in this query).
            page = page.values_list("created_at", "id")[offset : offset + 51]
            sql, params = page.query.sql_with_params()
            plan, ms = explain(sql, list(params))
            total_sql, total_params = counters.values("count").query.sql_with_params()
            total_plan, total_ms = explain(
                f"SELECT COALESCE(SUM(count), 0) FROM ({total_sql}) c",  # noqa: S608 - ORM SQL
                list(total_params),
            )
            runs = []
            for _ in range(5):
                t = time.perf_counter()
                history_page(user=user, status=status, limit=50, offset=offset, before=before)
                runs.append((time.perf_counter() - t) * 1000)
            runs.sort()
            where = f"offset={offset:,}" if before is None else f"before=<cursor at {deep:,}>"
            label = f"status={status or 'all'}, {where}"
            sections.append(
                f"### {label}\n\n"
                f"Page query {ms:.1f} ms, total (counters' sum) {total_ms:.1f} ms; whole "
                f"`history_page` (page + total, from Python) median {runs[2]:.1f} ms of 5.\n\n"
                f"```\n{plan}\n```\n\nTotal:\n\n```\n{total_plan}\n```\n"
            )
    body = (
        f"{SECTION}\n\n"
        f"A user with {history_calls().filter(owner=user).count():,} records on PostgreSQL "
        f"{connection.pg_version // 10000}, measured on {platform.node()} "
        f"({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}. Offsets are 500,000 for all and "
        "250,000 for `missed` (the missed rows number 300,000); the keyset pages start at the "
        "cursor a client holds at that same depth. Every page is an index range scan in order "
        "with no Sort node, and a keyset page's range starts at its cursor; `total` is a sum "
        "of at most 15 counter rows.\n\n" + "\n".join(sections)
    )
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if SECTION in text:
        before, _, after = text.partition(SECTION)
        nxt = after.find("\n## ")
        text = before + body + (after[nxt:] if nxt != -1 else "")
    else:
        text = text.rstrip() + "\n\n" + body
    DOC.write_text(text)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
