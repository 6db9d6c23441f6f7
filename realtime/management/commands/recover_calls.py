from django.core.management.base import BaseCommand

from realtime.tasks import calls_recover


class Command(BaseCommand):
    help = "Drive again (or fail) outbound calls whose worker died mid-step."

    def handle(self, *args, **options):
        self.stdout.write(f"Recovered {calls_recover()} call(s).")
