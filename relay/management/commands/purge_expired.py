from django.core.management.base import BaseCommand

from accounts.services import fraud_records_purge, refusals_purge
from captcha.services import captcha_purge_expired
from history.recordings import call_recordings_purge
from history.services import call_record_recordings_purge
from telephony.services import speech_cache_purge
from virtual_numbers.services import invitations_purge


class Command(BaseCommand):
    help = (
        "Delete expired CAPTCHA challenges and tokens, voicemail older than "
        "VOICEMAIL_RETENTION_DAYS, recordings of bridged calls older than "
        "CALL_RECORDING_RETENTION_DAYS, refused-call records older than a week, fraud records of "
        "deleted accounts older than a year, invitations to share a number past their 7 days, "
        "and the speech cache's messages used longest ago past TTS_CACHE_MAX_MB (runrelay "
        "runs it every 10 minutes)."
    )

    def handle(self, *args, **options):
        challenges, tokens = captcha_purge_expired()
        recordings = call_recordings_purge() + call_record_recordings_purge()
        refusals = refusals_purge()
        fraud_records = fraud_records_purge()
        messages, freed = speech_cache_purge()
        invitations = invitations_purge()
        self.stdout.write(
            f"Deleted {challenges} expired challenge(s) and {tokens} token(s), "
            f"{recordings} recording(s) past retention, {refusals} old refusal(s), "
            f"{fraud_records} old fraud record(s) of deleted accounts, "
            f"{invitations} expired invitation(s) and "
            f"{messages} spoken message(s) of the speech cache ({freed // 1000} kB)."
        )
