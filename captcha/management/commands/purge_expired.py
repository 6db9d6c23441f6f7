from django.core.management.base import BaseCommand

from captcha.services import captcha_purge_expired


class Command(BaseCommand):
    help = "Delete expired CAPTCHA challenges and tokens (runrelay runs it every 10 minutes)."

    def handle(self, *args, **options):
        challenges, tokens = captcha_purge_expired()
        self.stdout.write(f"Deleted {challenges} expired challenge(s) and {tokens} token(s).")
