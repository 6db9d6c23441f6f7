from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from core.phone import e164_valid
from history.services import record_inbound_call
from virtual_numbers.models import Number


class Command(BaseCommand):
    help = "Record an inbound call on a held number (pushes call_record to its owner)."

    def add_arguments(self, parser):
        parser.add_argument("--number", required=True, help="the held number, E.164")
        parser.add_argument("--caller", required=True, help="the caller's number, E.164")
        parser.add_argument("--status", required=True, help="answered, missed or blocked")
        parser.add_argument("--duration", type=int, default=0, help="seconds")
        parser.add_argument("--at", type=int, help="when, in ms since the epoch (default: now)")

    def handle(self, *args, number, caller, status, duration, at, **options):
        e164 = e164_valid(number)
        held = Number.objects.filter(number=e164).first() if e164 else None
        if held is None:
            raise CommandError(f"{number} is not a number anyone holds.")
        when = None
        if at is not None:
            try:
                when = datetime.fromtimestamp(at / 1000, tz=UTC)
            except (OverflowError, OSError, ValueError) as exc:
                raise CommandError(f"--at {at} is not a usable ms timestamp.") from exc
        try:
            record = record_inbound_call(
                number=held, caller_num=caller, status=status, duration=duration, at=when
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Recorded {record.status} call {record.id} on {held.number}.")
