"""Voicemail in the inbox, end to end: SIPp calls a number through Relay's agent and leaves
a message spoken by espeak-ng; runrelay's worker transcribes it (Whisper) and mails it
through a real SMTP server (aiosmtpd, STARTTLS and a login). The test reads that mail:
its headers and parts, the WAV attached (played by sox), the transcript's words, and the
link, opened in Chromium, landing on the call's page. A caller who hangs up while it rings
is a missed call's mail."""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from django.utils.html import escape

from harness.browser import launched_chromium
from harness.live import RelayProcess, wait_until
from harness.sip import free_udp_port, pcap_from_alaw
from harness.speech import SENTENCE, spoken_alaw
from telephony.inbound.voicemail import DEFAULT_GREETING
from telephony.speech import Speech
from tests.browser import NEEDS_CHROMIUM
from tests.console.pages import log_in
from tests.factories import NumberFactory, UserFactory
from tests.history.speech import CONTENT_WORDS, heard_words
from tests.records import records_count, refreshed
from tests.smtp import transport_settings
from tests.telephony.conftest import CALLER, call_in, sip_env, wait_for_records

pytestmark = [
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

BEEP_SECONDS = 0.4


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup, smtp_server):
    """runrelay with the SIP agent, mailing through the suite's SMTP server, transcribing."""
    workdir = tmp_path_factory.mktemp("voicemail-mail")
    env = sip_env(
        workdir,
        free_udp_port(),
        INBOUND_RING_SECONDS=1,
        EMAIL_URL=smtp_server.url,
        EMAIL_CA_FILE=smtp_server.ca_file,
        EMAIL_FROM="Relay <relay@relay.test>",
        TRANSCRIBE_ENGINE="whisper",
    )
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.workdir = workdir
    process.agent = env["SIP_BIND"]
    yield process
    process.stop()


@pytest.fixture
def owner(settings, relay, smtp_server, real_hashers):
    transport_settings(settings, smtp_server)
    with smtp_server.handler.lock:
        smtp_server.handler.received.clear()
    user = UserFactory(
        email="peter.owner@example.com",
        email_verified=True,
        voicemail_email=True,
        missed_call_email=True,
    )
    return user


@pytest.fixture
def number(owner):
    return NumberFactory(owner=owner, alias="Shop")


def mail_to(smtp_server, address: str, subject_start: str, deadline: float = 90):
    def arrived():
        with smtp_server.handler.lock:
            found = [
                m
                for m in smtp_server.handler.received
                if address in m.rcpt_tos and m.message["Subject"].startswith(subject_start)
            ]
        return found[0] if found else None

    return wait_until(arrived, deadline=deadline, what=f"a mail '{subject_start}...' to {address}")


@NEEDS_CHROMIUM
def test_a_spoken_message_arrives_by_mail_with_its_audio_transcript_and_link(
    relay, tmp_path, number, owner, smtp_server
):
    speech = Speech(tmp_path / "tts")
    greeting = len(speech.render(DEFAULT_GREETING, "en")[8]) / 8000 + BEEP_SECONDS
    spoken = spoken_alaw(SENTENCE)
    pcap = pcap_from_alaw(spoken, tmp_path / "message.pcap")
    said = len(spoken) / 8000
    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_message",
        number.number,
        pcap=pcap,
        greeting_ms=int((greeting + 0.3) * 1000),
        message_ms=int(said * 1000) + 300,
    )
    assert caller.finish(90) == 0, caller
    [record] = wait_for_records(number, 1)
    stored_at = time.monotonic()

    received = mail_to(smtp_server, owner.email, "Voicemail from")
    took = time.monotonic() - stored_at

    record = refreshed(record)
    assert record.transcript_status == "done"
    message = received.message
    assert message["Subject"] == (
        f"Voicemail from {CALLER} to Shop ({round(record.recording_seconds)} s)"
    )
    assert message["From"] == "Relay <relay@relay.test>"
    assert message["To"] == owner.email
    assert message["Auto-Submitted"] == "auto-generated"
    assert re.fullmatch(r"<[^@>]+@relay\.test>", message["Message-ID"])
    assert message.get_content_type() == "multipart/mixed"
    text, html = received.text, received.html
    heard = heard_words(record.transcript)
    assert len(heard & CONTENT_WORDS) >= 3, record.transcript
    assert f'"{record.transcript}"' in text
    assert "Automatic transcript, may be inaccurate" in text
    assert escape(record.transcript) in html  # Whisper's "it's" is escaped in HTML
    assert number.number in text and "(Shop)" in text

    [attached] = list(message.iter_attachments())
    assert attached.get_content_type() == "audio/wav"
    wav = tmp_path / "attached.wav"
    wav.write_bytes(attached.get_content())
    stat = subprocess.run(  # noqa: S603 - a Debian tool by name, our own arguments
        ["sox", str(wav), "-n", "stat"],  # noqa: S607
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    length = float(re.search(r"Length \(seconds\):\s+([\d.]+)", stat).group(1))
    rms = float(re.search(r"RMS\s+amplitude:\s+([\d.]+)", stat).group(1))
    assert length == pytest.approx(record.recording_seconds, abs=0.05)
    assert abs(length - said) <= 1.0
    assert rms > 0.02  # speech, not silence

    link = received.links()[-1]
    assert link.endswith(f"/history/{record.pk}")
    path = link[link.index("/history/") :]
    with launched_chromium() as browser:
        page = browser.new_page()
        log_in(page, relay.base, owner, then=path)
        main = page.inner_text("main")
        assert CALLER in main
        assert "Automatic transcript, may be inaccurate" in main
        assert record.transcript in main
        assert page.get_attribute("audio", "src") == f"/history/{record.pk}/recording"
    print(f"mail left {took:.1f} s after the record (transcription included)")


def test_a_caller_who_hangs_up_while_it_rings_is_a_missed_calls_mail(
    relay, tmp_path, number, owner, smtp_server
):
    caller = call_in(relay.agent, tmp_path, "inbound_cancel", number.number, resend="")
    assert caller.finish(30) == 0, caller
    [record] = wait_for_records(number, 1)
    assert record.status == "missed"

    received = mail_to(smtp_server, owner.email, "Missed call from")

    assert received.message["Subject"] == f"Missed call from {CALLER} to Shop"
    assert list(received.message.iter_attachments()) == []
    assert received.links()[-1].endswith(f"/history/{record.pk}")
    assert records_count(number=number) == 1
