import random
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from history.models import CallRecord, CallStatus
from history.services import record_inbound_call
from virtual_numbers.models import InventoryNumber
from virtual_numbers.services import inventory_provision, number_grant

DEMO_EMAIL = "demo@relay.example"
DEMO_PASSWORD = "relay-demo-password"  # noqa: S105 - a documented demo account, not a secret
DEMO_NUMBERS = [("Office", "1234"), ("Home", "2468"), ("Shop", "1357")]
DEMO_RECORDS = 300
CALLERS = [f"+4477009001{n:02d}" for n in range(40)]


class Command(BaseCommand):
    help = "Create a demo user with numbers and a few hundred call records (idempotent)."

    def handle(self, *args, **options):
        if User.objects.filter(email=DEMO_EMAIL).exists():
            self.stdout.write(f"Demo user exists already: {DEMO_EMAIL} / {DEMO_PASSWORD}")
            return
        if InventoryNumber.objects.filter(holding__isnull=True).count() < len(DEMO_NUMBERS):
            inventory_provision(start="+442079460000", count=1000)
        rng = random.Random(20261122)  # noqa: S311 - the same demo data every time, not a secret
        now = timezone.now()
        with transaction.atomic():
            user = User.objects.create_user(email=DEMO_EMAIL, password=DEMO_PASSWORD)
            numbers = [number_grant(user=user, alias=a, pin=p) for a, p in DEMO_NUMBERS]
            for i in range(DEMO_RECORDS):
                status = rng.choices(CallStatus.values, weights=[6, 3, 1])[0]
                record_inbound_call(
                    number=rng.choice(numbers),
                    caller_num=rng.choice(CALLERS),
                    status=status,
                    duration=rng.randint(5, 600) if status == CallStatus.ANSWERED else 0,
                    at=now - timedelta(minutes=37 * i + rng.randint(0, 30)),
                )
        count = CallRecord.objects.filter(owner=user).count()
        self.stdout.write(
            f"Demo user {DEMO_EMAIL} / {DEMO_PASSWORD}: {len(numbers)} numbers, {count} records."
        )
