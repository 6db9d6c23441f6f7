import random
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from history.models import CallStatus
from history.records import history_calls
from history.services import record_inbound_call
from virtual_numbers.models import InventoryNumber, Number
from virtual_numbers.services import inventory_provision, number_grant

DEMO_EMAIL = "demo@relay.example"
DEMO_PASSWORD = "relay-demo-password"  # noqa: S105 - a documented demo account, not a secret
# The demo numbers are fixed when free, so that the README's examples can name them.
DEMO_NUMBERS = [
    ("Office", "1234", "+442079460001"),
    ("Home", "2468", "+442079460002"),
    ("Shop", "1357", "+442079460003"),
]
DEMO_RECORDS = 300
CALLERS = [f"+4477009001{n:02d}" for n in range(40)]


class Command(BaseCommand):
    help = (
        "Create a demo user with numbers and a few hundred call records (idempotent); "
        "print its numbers."
    )

    def handle(self, *args, **options):
        user = User.objects.filter(email=DEMO_EMAIL).first()
        if user is not None:
            self.stdout.write(f"Demo user exists already: {DEMO_EMAIL} / {DEMO_PASSWORD}")
        else:
            user = self._create()
            count = history_calls().filter(owner=user).count()
            self.stdout.write(f"Demo user {DEMO_EMAIL} / {DEMO_PASSWORD}: {count} records.")
        for number in Number.objects.filter(owner=user).order_by("created_at", "number"):
            self.stdout.write(f"  {number.number}  {number.alias}")

    def _create(self) -> User:
        if InventoryNumber.objects.filter(holding__isnull=True).count() < len(DEMO_NUMBERS):
            inventory_provision(start="+442079460000", count=1000)
        rng = random.Random(20261122)  # noqa: S311 - the same demo data every time, not a secret
        now = timezone.now()
        with transaction.atomic():
            user = User.objects.create_user(
                email=DEMO_EMAIL, password=DEMO_PASSWORD, email_verified=True
            )
            numbers = [
                number_grant(user=user, alias=alias, pin=pin, preferred=e164)
                for alias, pin, e164 in DEMO_NUMBERS
            ]
            for i in range(DEMO_RECORDS):
                status = rng.choices(CallStatus.values, weights=[6, 3, 1])[0]
                record_inbound_call(
                    number=rng.choice(numbers),
                    caller_num=rng.choice(CALLERS),
                    status=status,
                    duration=rng.randint(5, 600) if status == CallStatus.ANSWERED else 0,
                    at=now - timedelta(minutes=37 * i + rng.randint(0, 30)),
                )
        return user
