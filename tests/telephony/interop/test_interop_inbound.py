"""Inbound calls from baresip through Kamailio to Relay's numbers (DESIGN §5.7): voicemail
records what the caller says, `*`, the PIN and `#` open the mailbox, and the in-dialog
requests of both ends follow the route set through the proxy. Over UDP, over TCP, and over
TLS with SRTP (the `transport` fixture), from a caller on the open network and from one behind
a NAT whose SDP names an address its RTP does not come from (Relay must latch onto the real
source). Over TLS, a caller that offers plain RTP is refused: Relay requires SRTP."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.hashers import make_password
from django.core.files.storage import FileSystemStorage

from harness.kamailio import NAT_ADDRESS, NAT_CALLER
from harness.live import wait_until
from harness.speech import silence_wav, sox_level, speech_wav
from telephony.inbound.mailbox import MENU, MENU_TIMEOUT
from telephony.speech import Speech
from tests.factories import NumberFactory
from tests.records import records_count, refreshed
from tests.telephony.conftest import stored_message, wait_for_records
from tests.telephony.interop.conftest import CALLER, expected_sdp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

GREETING = "Hi."
BEEP_SECONDS = 0.4
WORDS = "Please call me back about the delivery tomorrow morning."
STORED = "Call me back about the parcel."
CALLERS = pytest.mark.parametrize("caller_num", [CALLER, NAT_CALLER], ids=["open", "behind-nat"])


def spoken(text: str, tmp_path) -> float:
    """Seconds of `text` as the agent speaks it."""
    return len(Speech(tmp_path / "tts").render(text, "en")[8]) / 8000


@pytest.fixture
def number(user):
    """A number of `user` with a short greeting, so that voicemail answers quickly."""
    return NumberFactory(owner=user, alias="Shop", greeting=GREETING)


@pytest.fixture
def mailbox(real_hashers, number):
    """`number` with its PIN, 1234, hashed as Relay hashes it (Argon2), so that the agent,
    which runs Relay's own settings, can check it; and the default greeting, which `*` cuts
    short: its length costs nothing, and leaves a loaded machine time for the key."""
    number.pin_hash = make_password("1234")
    number.greeting = ""
    number.save(update_fields=["pin_hash", "greeting"])
    return number


def assert_record_route_copied(kamailio, call_id: str) -> None:
    """Relay's 180 and 200 to the INVITE carried Kamailio's Record-Route (RFC 3261 §12.1.1),
    so that the caller learns the route set its ACK and BYE must follow."""
    answers = kamailio.replies(call_id, 180) + kamailio.replies(call_id, 200)
    assert answers, kamailio.trace
    assert all(map(kamailio.carries_record_route, answers)), kamailio.trace


def assert_media(kamailio, call_id: str, transport: str) -> None:
    """The caller's INVITE and Relay's 200 had the SDP of `transport`: over TLS, RTP/SAVP with
    an SRTP key each (and every request and reply of the call went over `transport`, none in
    clear beside it)."""
    lines = kamailio.lines(call_id)
    invites = [line for line in lines if line.startswith("interop: request INVITE ")]
    answers = kamailio.replies(call_id, 200)
    assert invites and answers, kamailio.trace
    assert all(kamailio.sdp(line) == expected_sdp(transport) for line in invites + answers), (
        kamailio.trace
    )
    assert all(f" proto={transport} " in line for line in lines if " proto=" in line), (
        kamailio.trace
    )


def assert_sdp_rewritten(kamailio, call_id: str, caller_num: str) -> None:
    """Behind the NAT, Kamailio did rewrite the caller's SDP (else the test proves nothing)."""
    rewritten = [line for line in kamailio.lines(call_id) if NAT_ADDRESS in line]
    assert bool(rewritten) == (caller_num == NAT_CALLER), kamailio.trace


@CALLERS
def test_a_caller_through_the_carrier_edge_leaves_a_message(
    relay, kamailio, phones, number, tmp_path, caller_num, transport
):
    greeting = spoken(GREETING, tmp_path) + BEEP_SECONDS
    source = speech_wav(tmp_path / "words.wav", WORDS, before=greeting + 0.5, after=0.5)
    words = sox_level(source).seconds - greeting - 1.0
    caller = phones("caller", number=caller_num, source=source)

    caller.dial(number.number, kamailio)
    caller.wait_event("CALL_ESTABLISHED", deadline=20)
    caller.wait_event("CALL_CLOSED", deadline=greeting + words + 20)  # at the WAV's end

    [record] = wait_for_records(number, 1)
    assert (record.status, record.caller_num) == ("answered", caller_num)
    assert_sdp_rewritten(kamailio, record.sip_call_id, caller_num)
    assert_media(kamailio, record.sip_call_id, transport)
    # Voicemail recorded the words (its RTP was taken from where it came from).
    assert record.recording, "no message: the agent took no audio from the caller"
    stored = FileSystemStorage(location=relay.workdir / "recordings").path(record.recording)
    level = sox_level(stored)
    assert words <= level.seconds <= words + 3.0, (level, words)
    assert level.rms > 0.02 and level.maximum > 0.2, level  # speech, not silence
    # The caller heard the greeting and the beep (Relay's RTP reached where it came from).
    heard = caller.heard_seconds()
    assert greeting - 0.3 <= heard <= greeting + 1.0, (heard, greeting)
    # The caller's ACK and BYE went through Kamailio: Relay's 200 carried the Record-Route.
    assert_record_route_copied(kamailio, record.sip_call_id)
    assert kamailio.routed(record.sip_call_id, "ACK", sender=caller_num), kamailio.trace
    assert kamailio.routed(record.sip_call_id, "BYE", sender=caller_num), kamailio.trace


# The mailbox's keys over each transport once, from each side of the NAT at least once: where
# the keys' RTP comes from is latched as a message's is, and the voicemail test above covers
# every transport from both sides.
PIN_CALLERS = {"udp": NAT_CALLER, "tcp": CALLER, "tls": NAT_CALLER}


def test_the_pin_from_baresip_opens_the_mailbox_through_the_carrier_edge(
    relay, kamailio, phones, mailbox, tmp_path, transport
):
    number, caller_num = mailbox, PIN_CALLERS[transport]
    message, seconds = stored_message(relay, number, tmp_path, STORED)
    prompts = seconds + sum(
        spoken(text, tmp_path)
        for text in (
            "Please enter your PIN, then press the hash key.",
            "You have 1 new message.",
            "Message 1.",
            # the menu after the messages, said twice when no key comes, then goodbye
            MENU,
            MENU,
            "Goodbye.",
        )
    )
    caller = phones("caller", number=caller_num, source=silence_wav(tmp_path / "quiet.wav", 60))

    caller.dial(number.number, kamailio)
    caller.wait_event("CALL_ESTABLISHED", deadline=20)
    caller.command("sndcode", "*")  # during the greeting
    # The PIN a moment later, as a person types it: whether the prompt has begun or not
    # (keys after `*` are the PIN's, typed ahead of the prompt or during it).
    wait_until(
        lambda: caller.heard_seconds() > 1.5,
        deadline=15,
        what="the caller to hear the greeting or the prompt",
    )
    caller.command("sndcode", "1234#")
    # Relay hangs up: goodbye, after the menu's two waits for a key
    caller.wait_event("CALL_CLOSED", deadline=prompts + 2 * MENU_TIMEOUT + 30)

    message = refreshed(message)
    assert message.heard is True
    records = wait_for_records(number, 2)
    mailbox_call = next(r for r in records if r.pk != message.pk)
    assert (mailbox_call.status, mailbox_call.recording) == ("answered", "")
    assert_sdp_rewritten(kamailio, mailbox_call.sip_call_id, caller_num)
    assert_media(kamailio, mailbox_call.sip_call_id, transport)
    # The caller heard the mailbox, its prompts and the message, and the greeting's start.
    heard = sox_level(caller.heard())
    assert prompts - 1.0 <= heard.seconds <= prompts + 2.0, heard
    assert heard.rms > 0.02, heard
    # Relay's BYE followed the route set of the caller's INVITE; the caller's ACK followed the
    # Record-Route that Relay's 200 must have carried.
    call_id = mailbox_call.sip_call_id
    assert kamailio.routed(call_id, "BYE", sender=number.number), kamailio.trace
    assert_record_route_copied(kamailio, call_id)
    assert kamailio.routed(call_id, "ACK", sender=caller_num), kamailio.trace


@pytest.mark.parametrize("transport", ["tls"], indirect=True)
def test_a_caller_over_tls_without_srtp_is_refused_before_it_rings(
    relay, kamailio, phones, number, tmp_path
):
    # SIP_SRTP=required: an offer of plain RTP (baresip without mediaenc) gets 488 at once,
    # before it rings: nobody hears of a call Relay could never answer, and nothing is
    # recorded.
    caller = phones(
        "caller", number=CALLER, source=silence_wav(tmp_path / "quiet.wav", 30), srtp=False
    )

    caller.dial(number.number, kamailio)
    closed = caller.wait_event("CALL_CLOSED", deadline=20)

    assert "488" in closed.param, closed.raw
    assert not [e for e in caller.events if e.type == "CALL_ESTABLISHED"], caller.events
    dialled = [
        line
        for line in kamailio.lines()
        if line.startswith(f"interop: request INVITE sip:{number.number}@")
    ]
    assert dialled, kamailio.trace
    call_id = re.search(r"call-id=(\S+)", dialled[-1]).group(1)
    invites = [
        line for line in kamailio.lines(call_id) if line.startswith("interop: request INVITE ")
    ]
    assert all(kamailio.sdp(line) == "sdp=RTP/AVP crypto=no" for line in invites), kamailio.trace
    assert kamailio.replies(call_id, 488), kamailio.trace
    assert not kamailio.replies(call_id, 180), kamailio.trace
    assert not kamailio.replies(call_id, 200), kamailio.trace
    assert not records_count(number=number) > 0
