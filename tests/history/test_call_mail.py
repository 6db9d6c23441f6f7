"""Mail about calls (history.notifications), read at a real SMTP server: a voicemail's mail
with its WAV attached (played by sox), linked, or too large to attach; with its transcript,
with a transcript that failed, with transcription off; withdrawn with a deleted message; a
missed call's mail and its throttle; nothing about a blocked caller, nothing to an address
that must be verified first, nothing when the switch is off."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from django.test import Client

from core.recordings import recordings_storage
from harness.speech import spoken_message
from history.services import call_record_recording_delete, record_inbound_call
from mail.models import OutboundMail
from tests.conftest import drain_tasks
from tests.console.conftest import sign_in
from tests.factories import BlockedCallerFactory, NumberFactory, UserFactory, voicemail_on
from tests.history.speech import require_speech
from tests.records import records_count, refreshed

pytestmark = pytest.mark.django_db

CALLER = "+447700900123"


@pytest.fixture
def owner():
    return UserFactory(
        email="owner@example.com",
        email_verified=True,
        voicemail_email=True,
        missed_call_email=True,
    )


@pytest.fixture
def number(owner):
    return NumberFactory(owner=owner, alias="Shop")


@pytest.fixture(autouse=True)
def _public_url(settings):
    """The mails' links (transcription is off unless a test turns it on: tests/settings.py)."""
    settings.PUBLIC_URL = "https://relay.example.com"


def missed(number, caller: str = CALLER):
    return record_inbound_call(number=number, caller_num=caller, status="missed", duration=0)


def attachments(received) -> list:
    return list(received.message.iter_attachments())


def test_a_voicemail_mail_says_who_called_which_number_when_and_how_long(mailbox, number):
    record = voicemail_on(number, seconds=2.0)

    received = mailbox.only("owner@example.com")

    message = received.message
    assert message["Subject"] == f"Voicemail from {CALLER} to Shop (2 s)"
    assert message["Auto-Submitted"] == "auto-generated"
    text = received.text
    assert CALLER in text and number.number in text and "(Shop)" in text
    assert record.created_at.strftime("%Y-%m-%d %H:%M") in text
    assert "Length:  2 s" in text
    assert "transcript" not in text.lower()  # transcription is off
    link = f"https://relay.example.com/history/{record.pk}"
    assert received.links()[-1] == link
    assert f'href="{link}"' in received.html


@pytest.mark.skipif(shutil.which("sox") is None, reason="sox (Debian sox) is not installed")
def test_the_wav_is_attached_and_plays(mailbox, number, tmp_path):
    record = voicemail_on(number, seconds=1.5)

    [attached] = attachments(mailbox.only("owner@example.com"))

    assert attached.get_content_type() == "audio/wav"
    name = attached.get_filename()
    assert name == f"voicemail-{CALLER}-{record.created_at:%Y%m%d-%H%M%S}.wav"
    path = tmp_path / "attached.wav"
    path.write_bytes(attached.get_content())
    with recordings_storage().open(record.recording, "rb") as stored:
        assert path.read_bytes() == stored.read()

    def soxi(flag: str) -> str:
        run = subprocess.run(  # noqa: S603 - soxi by name, our own arguments
            ["soxi", flag, str(path)],  # noqa: S607
            capture_output=True,
            text=True,
            check=True,
        )
        return run.stdout.strip()

    assert (soxi("-r"), soxi("-c")) == ("8000", "1")
    assert float(soxi("-D")) == pytest.approx(1.5, abs=0.01)


def test_with_attach_audio_off_the_mail_links_the_message_alone(mailbox, number, owner):
    owner.attach_audio = False
    owner.save()
    record = voicemail_on(number)

    received = mailbox.only("owner@example.com")

    assert attachments(received) == []
    assert "Listen to it in your history." in received.text
    assert received.links()[-1].endswith(f"/history/{record.pk}")


def test_a_message_over_the_limit_is_linked_not_attached(mailbox, number, settings):
    settings.VOICEMAIL_EMAIL_MAX_MB = 0.01  # 10 KB: a 1 s message is 16 KB
    voicemail_on(number, seconds=1.0)

    received = mailbox.only("owner@example.com")

    assert attachments(received) == []
    assert "too large to attach (0.0 MB; at most 0.01 MB)" in received.text


def test_a_message_deleted_before_its_mail_left_takes_the_mail_with_it(mailbox, number):
    record = voicemail_on(number)
    assert OutboundMail.objects.filter(template="voicemail").count() == 1

    call_record_recording_delete(record=record)

    assert OutboundMail.objects.filter(template="voicemail").count() == 0
    assert mailbox.delivered() == []


def test_no_mail_when_the_switch_is_off(mailbox, number, owner):
    owner.voicemail_email = owner.missed_call_email = False
    owner.save()

    voicemail_on(number)
    missed(number)

    assert mailbox.delivered() == []


def test_never_about_a_blocked_caller(mailbox, number):
    BlockedCallerFactory(number=number, caller_num=CALLER)

    record = voicemail_on(number)
    missed(number)

    assert record.status == "blocked"
    assert mailbox.delivered() == []


def test_an_unverified_address_gets_nothing_where_verification_is_required(
    mailbox, number, owner, settings
):
    settings.REQUIRE_EMAIL_VERIFICATION = True
    owner.email_verified = False
    owner.save()

    voicemail_on(number)
    missed(number)
    assert mailbox.delivered() == []

    owner.email_verified = True
    owner.save()
    missed(number, caller="+447700900124")
    assert len(mailbox.delivered()) == 1


def test_where_verification_is_not_required_an_unverified_address_gets_its_mail(
    mailbox, number, owner, settings
):
    settings.REQUIRE_EMAIL_VERIFICATION = False
    owner.email_verified = False
    owner.save()

    voicemail_on(number)

    assert len(mailbox.delivered()) == 1


# --- missed calls ----------------------------------------------------------------------------
def test_a_missed_call_is_mailed_once_per_caller_and_number_in_ten_minutes(
    mailbox, number, owner, clock
):
    other_number = NumberFactory(owner=owner, alias="Home")
    missed(number)
    missed(number)  # the same caller again at once: throttled
    missed(number, caller="+447700900555")  # another caller: mailed
    missed(other_number)  # the same caller on another number: mailed
    clock.advance(minutes=9, seconds=59)
    missed(number)  # still within ten minutes of the first
    first = mailbox.delivered()

    assert sorted(m.message["Subject"] for m in first) == sorted(
        [
            f"Missed call from {CALLER} to Shop",
            "Missed call from +447700900555 to Shop",
            f"Missed call from {CALLER} to Home",
        ]
    )
    clock.advance(seconds=2)
    missed(number)
    assert len(mailbox.delivered()) == 4
    assert records_count(status="missed") == 6  # every call is recorded


def test_a_missed_mail_says_what_happened_and_links_the_history(mailbox, number):
    record = missed(number)

    received = mailbox.only("owner@example.com")

    assert "You missed a call from +447700900123." in received.text
    assert "next 10 minutes are not mailed" in received.text
    assert received.links()[-1] == f"https://relay.example.com/history/{record.pk}"


def test_voicemail_answered_with_nothing_left_counts_as_missed(mailbox, number):
    record_inbound_call(
        number=number, caller_num=CALLER, status="answered", duration=4, answered_by="voicemail"
    )

    received = mailbox.only("owner@example.com")

    assert received.message["Subject"] == f"Missed call from {CALLER} to Shop"


def test_a_forwarded_call_someone_answered_is_not_mailed(mailbox, number):
    record_inbound_call(
        number=number,
        caller_num=CALLER,
        status="answered",
        duration=30,
        answered_by="forward",
        forwarded_to="+447700900777",
    )

    assert mailbox.delivered() == []


def test_a_withheld_caller_is_named_as_such(mailbox, number):
    missed(number, caller="anonymous")

    received = mailbox.only("owner@example.com")

    assert received.message["Subject"] == "Missed call from an anonymous caller to Shop"


# --- the link -------------------------------------------------------------------------------
def test_the_link_opens_the_history_entry_for_its_owner_only(mailbox, number, owner):
    record = voicemail_on(number)
    path = re.sub(r"^https://relay\.example\.com", "", mailbox.only(owner.email).links()[-1])

    client = Client()
    sign_in(client, owner)
    page = client.get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert CALLER in html and f"/history/{record.pk}/recording" in html

    stranger = Client()
    sign_in(stranger, UserFactory())
    assert stranger.get(path).status_code == 404
    assert Client().get(path).status_code == 302  # signed out: to the sign-in page


# --- transcripts in the mail ----------------------------------------------------------------
def test_with_transcription_on_the_mail_waits_for_the_transcript(mailbox, number, settings):
    settings.TRANSCRIBE_ENGINE = "whisper"
    require_speech()
    record = voicemail_on(number, data=spoken_message()[0])
    assert record.transcript_status == "pending"
    assert not OutboundMail.objects.filter(template="voicemail").exists()

    received = mailbox.only("owner@example.com")

    record = refreshed(record)
    assert record.transcript_status == "done" and record.transcript
    assert "Automatic transcript, may be inaccurate" in received.text
    assert f'"{record.transcript}"' in received.text
    assert "Automatic transcript, may be inaccurate" in received.html


def test_a_transcript_with_no_words_says_so(mailbox, number, settings):
    settings.TRANSCRIBE_ENGINE = "whisper"
    record = voicemail_on(number)  # a steady hum: nothing to hear

    received = mailbox.only("owner@example.com")

    record = refreshed(record)
    assert (record.transcript_status, record.transcript) == ("done", "")
    assert "Automatic transcript: no words were recognised." in received.text


def test_a_transcript_that_fails_lets_the_mail_go_without_it(mailbox, number, settings):
    settings.TRANSCRIBE_ENGINE = "whisper"
    record = voicemail_on(number, data=b"this is not a WAV file at all" * 100)

    received = mailbox.only("owner@example.com")

    record = refreshed(record)
    assert (record.transcript_status, record.transcript, record.transcript_confidence) == (
        "failed",
        "",
        None,
    )
    assert "No transcript: the message could not be transcribed." in received.text
    assert "Automatic transcript" not in received.text


def test_the_mail_is_sent_when_the_task_runs_not_before(mailbox, number):
    voicemail_on(number)

    assert mailbox.messages == []  # queued in the record's transaction, sent by the worker
    drain_tasks()
    assert len(mailbox.messages) == 1


def test_a_failing_smtp_server_keeps_the_mail_for_a_retry(mailbox, number, clock):
    mailbox.answer_next("451 4.3.0 Try again later")
    voicemail_on(number)

    assert mailbox.delivered() == []
    row = OutboundMail.objects.get(template="voicemail")
    assert (row.status, row.attempts, row.attachment != "") == ("pending", 1, True)
    clock.advance(seconds=40)
    [received] = mailbox.delivered()
    assert len(attachments(received)) == 1
