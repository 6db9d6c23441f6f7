"""Bulk-load call records (ended inbound calls of the ledger) for benchmarks: one INSERT ... SELECT
per chunk on either database (generate_series on PostgreSQL, a recursive CTE on SQLite), so that
no row passes through Python: 100,000 rows load in seconds, not the minutes of model objects.

This bypasses record_inbound_call on purpose (no events, no blocklist, no legs: each call's
`last_seq` is 0): it fabricates volume for measurements, it does not record calls. It still
counts what it loads, in the same transaction, so `total` of the history list stays exact.
"""

import json
import time
from collections import Counter

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from calls.models import OutcomeCounter
from core.counters import counters_add
from virtual_numbers.models import InventoryNumber, Number
from virtual_numbers.services import inventory_provision, number_grant

CHUNK = 250_000

# Outcomes: six answered, three missed, one blocked in every ten rows, spread through time.
# Which one row i gets (OUTCOMES[i * 7 % 10]), with the status and duration that go with it:
# the same SQL on both databases.
OUTCOMES = ["answered"] * 6 + ["missed"] * 3 + ["blocked"]
_KIND = "i * 7 %% 10"
_ANSWERED, _MISSED = OUTCOMES.index("missed"), OUTCOMES.index("blocked")  # the kinds' ends
ROW_STATUS = (
    f"CASE WHEN {_KIND} < {_ANSWERED} THEN 'completed' "
    f"WHEN {_KIND} < {_MISSED} THEN 'no_answer' ELSE 'busy' END"
)
ROW_DURATION = f"CASE WHEN {_KIND} < {_ANSWERED} THEN 5 + (i %% 600) ELSE 0 END"
ROW_OUTCOME = (
    f"CASE WHEN {_KIND} < {_ANSWERED} THEN 'answered' "
    f"WHEN {_KIND} < {_MISSED} THEN 'missed' ELSE 'blocked' END"
)

PG_INSERT = f"""
INSERT INTO calls_call (id, direction, owner_id, number_id, call_id, "to", message, language,
                        caller_id, status_callback, rtc_offer, status, last_seq, created_at,
                        updated_at, ended_at, duration, failure_reason, sip_call_id, recoveries,
                        outcome)
SELECT gen_random_uuid(), 'inbound', %(owner)s::uuid,
       (%(numbers)s::uuid[])[1 + (i %% cardinality(%(numbers)s::uuid[]))],
       '', '', '', 'en',
       '+4477009' || lpad((i %% 100000)::text, 5, '0'),
       '', '', {ROW_STATUS},
       0, at, at, at, {ROW_DURATION}, '', '', 0, {ROW_OUTCOME}
FROM generate_series(%(first)s, %(last)s) AS i,
     LATERAL (SELECT %(start)s::timestamptz - make_interval(secs => i * 3) AS at) AS t
"""  # noqa: S608 - constant SQL
# What one PG_INSERT added, per number and outcome, for the counters.
PG_INSERT_COUNTED = f"""
WITH inserted AS ({PG_INSERT} RETURNING number_id, outcome)
SELECT number_id, outcome, COUNT(*) FROM inserted GROUP BY number_id, outcome
"""  # noqa: S608 - constant SQL

# The same rows on SQLite: ids as Django stores a UUIDField there (32 hex digits), times as it
# stores a DateTimeField (UTC text), the outcome and duration by the same arithmetic.
SQLITE_INSERT = f"""
WITH RECURSIVE series(i) AS (
    SELECT %(first)s UNION ALL SELECT i + 1 FROM series WHERE i < %(last)s
)
INSERT INTO calls_call (id, direction, owner_id, number_id, call_id, "to", message, language,
                        caller_id, status_callback, rtc_offer, status, last_seq, created_at,
                        updated_at, ended_at, duration, failure_reason, sip_call_id, recoveries,
                        outcome)
SELECT lower(hex(randomblob(16))), 'inbound', %(owner)s,
       json_extract(%(numbers)s, '$[' || (i %% json_array_length(%(numbers)s)) || ']'),
       '', '', '', 'en',
       '+4477009' || substr('00000' || (i %% 100000), -5),
       '', '', {ROW_STATUS},
       0, at, at, at, {ROW_DURATION}, '', '', 0, {ROW_OUTCOME}
FROM (SELECT i, strftime('%%Y-%%m-%%d %%H:%%M:%%S', %(start)s, '-' || (i * 3) || ' seconds')
                || %(micro)s AS at FROM series)
"""  # noqa: S608 - constant SQL


class Command(BaseCommand):
    help = "Bulk-load N call records for a user (for benchmarks)."

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True)
        parser.add_argument("--count", type=int, required=True)

    def handle(self, *args, email, count, **options):
        user = User.objects.filter(email=email.strip().lower()).first()
        if user is None:
            raise CommandError(f"No user with e-mail {email}.")
        if count < 1:
            raise CommandError("--count must be at least 1.")
        numbers = list(Number.objects.filter(owner=user).values_list("pk", flat=True))
        if not numbers:
            if not InventoryNumber.objects.filter(holding__isnull=True).exists():
                inventory_provision(start="+442079460000", count=1000)
            numbers = [number_grant(user=user, alias="Bench", pin="1234").pk]
        started = time.monotonic()
        start = timezone.now()
        if connection.vendor == "postgresql":
            self._load_postgres(user, numbers, count, start)
        else:
            self._load_sqlite(user, numbers, count, start)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("ANALYZE calls_call")
        self.stdout.write(
            f"Loaded {count} records for {user.email} in {time.monotonic() - started:.1f}s."
        )

    def _load_postgres(self, user, numbers, count, start):
        with transaction.atomic(), connection.cursor() as cursor:
            for first in range(0, count, CHUNK):
                last = min(first + CHUNK, count) - 1
                cursor.execute(
                    PG_INSERT_COUNTED,
                    {
                        "numbers": [str(n) for n in numbers],
                        "owner": str(user.pk),
                        "start": start,
                        "first": first,
                        "last": last,
                    },
                )
                counters_add(
                    OutcomeCounter,
                    [
                        ({"owner_id": user.pk, "number_id": number_id, "outcome": outcome}, added)
                        for number_id, outcome, added in cursor.fetchall()
                    ],
                )

    def _load_sqlite(self, user, numbers, count, start):
        keys = [n.hex for n in numbers]
        with transaction.atomic(), connection.cursor() as cursor:
            for first in range(0, count, CHUNK):
                last = min(first + CHUNK, count) - 1
                cursor.execute(
                    SQLITE_INSERT,
                    {
                        "numbers": json.dumps(keys),
                        "owner": user.pk.hex,
                        "start": start.strftime("%Y-%m-%d %H:%M:%S"),
                        "micro": f".{start.microsecond:06d}",
                        "first": first,
                        "last": last,
                    },
                )
            added = Counter((numbers[i % len(numbers)], OUTCOMES[i * 7 % 10]) for i in range(count))
            counters_add(
                OutcomeCounter,
                [
                    ({"owner_id": user.pk, "number_id": number_id, "outcome": outcome}, n)
                    for (number_id, outcome), n in added.items()
                ],
            )
