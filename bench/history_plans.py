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
from history.models import CallRecord  # noqa: E402

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
    have = CallRecord.objects.filter(owner=user).count()
    if have < args.count:
        started = time.monotonic()
        call_command("seed_history", "--email", EMAIL, "--count", str(args.count - have))
        print(f"loaded in {time.monotonic() - started:.1f}s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE history_callrecord")

    from history.selectors import history_page

    sections = []
    for status in (None, "missed"):
        for offset in (0, 500_000 if status is None else 250_000):
            records = CallRecord.objects.filter(owner=user)
            if status:
                records = records.filter(status=status)
            # The page's id walk, as history_page runs it (the row fetch is 50 pk lookups).
            page = records.order_by("-created_at", "-id").values_list("id", flat=True)[
                offset : offset + 50
            ]
            sql, params = page.query.sql_with_params()
            plan, ms = explain(sql, list(params))
            count_sql, count_params = records.values("pk").query.sql_with_params()
            count_plan, count_ms = explain(
                f"SELECT count(*) FROM ({count_sql}) c",  # noqa: S608 - ORM-generated SQL
                list(count_params),
            )
            runs = []
            for _ in range(5):
                t = time.perf_counter()
                history_page(user=user, status=status, limit=50, offset=offset)
                runs.append((time.perf_counter() - t) * 1000)
            runs.sort()
            label = f"status={status or 'all'}, offset={offset:,}"
            sections.append(
                f"### {label}\n\n"
                f"Page query {ms:.1f} ms, total COUNT {count_ms:.1f} ms; whole `history_page` "
                f"(page + count, from Python) median {runs[2]:.1f} ms of 5.\n\n"
                f"```\n{plan}\n```\n\nCount:\n\n```\n{count_plan}\n```\n"
            )
    body = (
        f"{SECTION}\n\n"
        f"A user with {CallRecord.objects.filter(owner=user).count():,} records on PostgreSQL "
        f"{connection.pg_version // 10000}, measured on {platform.node()} "
        f"({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}. Offsets are 500,000 for all and "
        "250,000 for `missed` (the missed rows number 300,000). Every page is an index range scan "
        "in order with no Sort node; the count is an index-only scan over the user's (and status') "
        "range.\n\n" + "\n".join(sections)
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
