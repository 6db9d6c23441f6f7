"""Bulk-load call records for benchmarks: generate_series on PostgreSQL, batches elsewhere.

This bypasses record_inbound_call on purpose (no events, no blocklist): it fabricates volume
for measurements, it does not record calls. It still counts what it loads, in the same
transaction, so `total` of the history list stays exact.
"""

import random
import time
import uuid
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from core.counters import counters_add
from history.models import CallRecord, CallRecordCounter, CallStatus
from history.services import call_record_counters_add
from virtual_numbers.models import InventoryNumber, Number
from virtual_numbers.services import inventory_provision, number_grant

BATCH = 5000

# Statuses: six answered, three missed, one blocked in every ten rows, spread through time.
PG_INSERT = """
INSERT INTO history_callrecord (id, number_id, owner_id, caller_num, status, duration, created_at)
SELECT gen_random_uuid(),
       (%(numbers)s::uuid[])[1 + (i %% cardinality(%(numbers)s::uuid[]))],
       %(owner)s::uuid,
       '+4477009' || lpad((i %% 100000)::text, 5, '0'),
       (ARRAY['answered', 'answered', 'answered', 'answered', 'answered', 'answered',
              'missed', 'missed', 'missed', 'blocked'])[1 + (i * 7 %% 10)],
       CASE WHEN i * 7 %% 10 < 6 THEN 5 + (i %% 600) ELSE 0 END,
       %(start)s::timestamptz - make_interval(secs => i * 3)
FROM generate_series(%(first)s, %(last)s) AS i
"""
# What one PG_INSERT added, per number and status, for the counters.
PG_INSERT_COUNTED = f"""
WITH inserted AS ({PG_INSERT} RETURNING number_id, status)
SELECT number_id, status, COUNT(*) FROM inserted GROUP BY number_id, status
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
                cursor.execute("ANALYZE history_callrecord")
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
                    CallRecordCounter,
                    [
                        ({"owner_id": user.pk, "number_id": number_id, "status": status}, added)
                        for number_id, status, added in cursor.fetchall()
                    ],
                )

    def _load_batches(self, user, numbers, count, start):
        rng = random.Random(count)  # noqa: S311 - benchmark data, not a secret
        statuses = CallStatus.values
        for first in range(0, count, BATCH):
            rows = [
                CallRecord(
                    id=uuid.uuid4(),
                    number_id=numbers[i % len(numbers)],
                    owner_id=user.pk,
                    caller_num=f"+4477009{i % 100000:05d}",
                    status=rng.choices(statuses, weights=[6, 3, 1])[0],
                    duration=rng.randint(0, 600),
                    created_at=start - timedelta(seconds=3 * i),
                )
                for i in range(first, min(first + BATCH, count))
            ]
            with transaction.atomic():
                CallRecord.objects.bulk_create(rows)
                call_record_counters_add(records=rows)
