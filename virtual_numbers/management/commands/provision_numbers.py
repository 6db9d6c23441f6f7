from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from virtual_numbers import services
from virtual_numbers.models import InventoryNumber


class Command(BaseCommand):
    help = "Add a range of E.164 numbers to the inventory (existing ones are skipped)."

    def add_arguments(self, parser):
        parser.add_argument("--start", required=True, help="first number, e.g. +442079460000")
        parser.add_argument("--count", type=int, required=True, help="how many numbers")
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="do nothing when the inventory already holds numbers (used by make run)",
        )

    def handle(self, *args, start, count, if_empty, **options):
        if if_empty and InventoryNumber.objects.exists():
            self.stdout.write("The inventory is not empty; nothing provisioned.")
            return
        try:
            result = services.inventory_provision(start=start, count=count)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            f"Added {result.added} number(s); {result.existing} already existed, "
            f"{result.invalid} were not valid numbers."
        )
