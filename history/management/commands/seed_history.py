"""Bulk-load call records (ended inbound calls of the ledger) for benchmarks: generate_series on
PostgreSQL, batches elsewhere.

This bypasses record_inbound_call on purpose (no events, no blocklist, no legs: each call's
`last_seq` is 0): it fabricates volume for measurements, it does not record calls. It still
counts what it loads, in the same transaction, so `total` of the history list stays exact.
"""

import random
import time
import uuid
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from calls.models import Call, Direction, OutcomeCounter
from calls.services import END_STATES, outcomes_counted
from core.counters import counters_add
from history.models import CallStatus
from virtual_numbers.models import InventoryNumber, Number
from virtual_numbers.services import inventory_provision, number_grant

BATCH = 5000

# Outcomes: six answered, three missed, one blocked in every ten rows, spread through time.
PG_INSERT = """
INSERT INTO calls_call (id, direction, owner_id, number_id, call_id, "to", message, language,
                        caller_id, status_callback, rtc_offer, status, last_seq, created_at,
                        updated_at, ended_at, duration, failure_reason, sip_call_id, recoveries,
                        outcome)
SELECT gen_random_uuid(), 'inbound', %(owner)s::uuid,
       (%(numbers)s::uuid[])[1 + (i %% cardinality(%(numbers)s::uuid[]))],
       '', '', '', 'en',
       '+4477009' || lpad((i %% 100000)::text, 5, '0'),
       '', '', CASE WHEN i * 7 %% 10 < 6 THEN 'completed'
                    WHEN i * 7 %% 10 < 9 THEN 'no_answer' ELSE 'busy' END,
       0, at, at, at,
       CASE WHEN i * 7 %% 10 < 6 THEN 5 + (i %% 600) ELSE 0 END,
       '', '', 0,
       (ARRAY['answered', 'answered', 'answered', 'answered', 'answered', 'answered',
              'missed', 'missed', 'missed', 'blocked'])[1 + (i * 7 %% 10)]
FROM generate_series(%(first)s, %(last)s) AS i,
     LATERAL (SELECT %(start)s::timestamptz - make_interval(secs => i * 3) AS at) AS t
"""
# What one PG_INSERT added, per number and outcome, for the counters.
PG_INSERT_COUNTED = f"""
WITH inserted AS ({PG_INSERT} RETURNING number_id, outcome)
SELECT number_id, outcome, COUNT(*) FROM inserted GROUP BY number_id, outcome
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
            self._load_batches(user, numbers, count, start)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("ANALYZE calls_call")
        self.stdout.write(
            f"Loaded {count} records for {user.email} in {time.monotonic() - started:.1f}s."
        )

    def _load_postgres(self, user, numbers, count, start):
        with transaction.atomic(), connection.cursor() as cursor:
            for first in range(0, count, 250_000):
                last = min(first + 250_000, count) - 1
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

    def _load_batches(self, user, numbers, count, start):
        rng = random.Random(count)  # noqa: S311 - benchmark data, not a secret
        statuses = CallStatus.values
        for first in range(0, count, BATCH):
            rows = []
            for i in range(first, min(first + BATCH, count)):
                outcome = rng.choices(statuses, weights=[6, 3, 1])[0]
                at = start - timedelta(seconds=3 * i)
                rows.append(
                    Call(
                        id=uuid.uuid4(),
                        direction=Direction.INBOUND,
                        number_id=numbers[i % len(numbers)],
                        owner_id=user.pk,
                        caller_id=f"+4477009{i % 100000:05d}",
                        message="",
                        status=END_STATES[outcome],
                        outcome=outcome,
                        last_seq=0,
                        duration=rng.randint(0, 600),
                        created_at=at,
                        updated_at=at,
                        ended_at=at,
                    )
                )
            with transaction.atomic():
                Call.objects.bulk_create(rows)
                outcomes_counted(rows)
