from django.core.management.base import BaseCommand

from captcha.services import captcha_purge_expired
from history.services import call_record_recordings_purge


class Command(BaseCommand):
    help = (
        "Delete expired CAPTCHA challenges and tokens, and voicemail older than "
        "VOICEMAIL_RETENTION_DAYS (runrelay runs it every 10 minutes)."
    )

    def handle(self, *args, **options):
        challenges, tokens = captcha_purge_expired()
        recordings = call_record_recordings_purge()
        self.stdout.write(
            f"Deleted {challenges} expired challenge(s) and {tokens} token(s), "
            f"and {recordings} recording(s) past retention."
        )
