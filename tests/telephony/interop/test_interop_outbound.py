"""Outbound calls through Kamailio to baresip (DESIGN §5.7): the carrier edge asks Relay for
proxy credentials, the callee answers, hears the message, and the in-dialog requests follow
the route set through the proxy. Over UDP, over TCP, and over TLS with SRTP (the `transport`
fixture)."""

from __future__ import annotations

import subprocess

import pytest

from calls.states import TERMINAL_STATES
from harness.kamailio import CALLEE
from harness.live import tool, wait_until
from harness.speech import silence_wav, sox_level, speech_wav, tone_wav, voiced_spans
from telephony.speech import Speech
from tests.telephony.conftest import status_of, submit
from tests.telephony.interop.conftest import expected_sdp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

MESSAGE = "Hello from Relay. The parcel is at the door."


def spoken_seconds(text: str, tmp_path) -> float:
    """How long the agent's rendering of `text` plays (it plays the law it negotiated)."""
    return len(Speech(tmp_path / "tts").render(text, "en")[0]) / 8000


def test_a_call_through_the_carrier_edge_is_heard_by_the_callee(
    relay, kamailio, phones, user, tmp_path, transport
):
    callee = phones(
        "callee", number=CALLEE, source=silence_wav(tmp_path / "quiet.wav", 60), answer=True
    )
    expected = spoken_seconds(MESSAGE, tmp_path)

    call = submit(user, "interop-out", MESSAGE, to=CALLEE)
    wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=60, what="the call to end")

    assert (call.status, call.failure_reason) == ("completed", ""), relay
    callee.wait_event("CALL_CLOSED", deadline=10)
    level = sox_level(callee.heard())
    assert abs(level.seconds - expected) <= 1.0, level
    assert level.rms > 0.02 and level.maximum > 0.2, level  # speech, not silence
    call_id = call.sip_call_id
    lines = kamailio.lines(call_id)
    assert any(line.startswith("interop: challenge INVITE") for line in lines), kamailio.trace
    assert any(line.startswith("interop: authenticated INVITE") for line in lines), kamailio.trace
    # Relay's ACK and BYE carry the route set of the callee's 200 (Kamailio's Record-Route,
    # which baresip copied), so they reach the callee through the proxy, over the transport
    # of the test.
    answers = kamailio.replies(call_id, 200)
    assert answers and all(map(kamailio.carries_record_route, answers)), kamailio.trace
    assert kamailio.routed(call_id, "ACK"), kamailio.trace
    assert kamailio.routed(call_id, "BYE"), kamailio.trace
    requests = [line for line in lines if line.startswith("interop: request ")]
    assert all(f" proto={transport}" in line for line in requests), kamailio.trace
    replies = [line for line in lines if line.startswith("interop: reply ")]
    assert all(f" proto={transport}" in line for line in replies), kamailio.trace
    # Over TLS the media was SRTP both ways: Relay offered RTP/SAVP with a key of its suite,
    # and the callee answered the same (its audio above was decrypted with those keys).
    invites = [line for line in requests if line.startswith("interop: request INVITE ")]
    assert invites and all(kamailio.sdp(line) == expected_sdp(transport) for line in invites), (
        kamailio.trace
    )
    assert all(kamailio.sdp(line) == expected_sdp(transport) for line in answers), kamailio.trace


@pytest.mark.parametrize("transport", ["tls"], indirect=True)  # the hardest: keys in SRTP
def test_a_scripted_call_hears_the_callees_key_through_the_carrier_edge(
    relay, kamailio, phones, user, tmp_path, transport
):
    """A script's gather through the carrier edge (issue 41): baresip, as the callee, presses
    2 through its control interface (RFC 4733, SRTP-encrypted over TLS); Relay takes the
    branch and hangs up when the script ends. What baresip heard is the prompt, cut short by
    the key, then the branch's speech."""
    callee = phones(
        "callee", number=CALLEE, source=silence_wav(tmp_path / "quiet.wav", 60), answer=True
    )
    prompt = "Press 2 to cancel your appointment, or stay on the line to keep it as it is."
    menu = {
        "numDigits": 1,
        "timeout": 20,
        "say": {"text": prompt},
        "branches": {"2": [{"say": {"text": "Cancelled."}}], "default": [{"hangup": {}}]},
    }

    call = submit(user, "interop-script", to=CALLEE, script=[{"gather": menu}])
    callee.wait_event("CALL_ESTABLISHED", deadline=30)
    callee.command("sndcode", "2")
    wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=60, what="the call to end")

    assert (call.status, call.failure_reason) == ("completed", ""), relay
    (gathered,) = call.events.exclude(kind="")
    assert gathered.data["result"] == {"digits": "2", "reason": "numDigits"}
    callee.wait_event("CALL_CLOSED", deadline=10)  # Relay hung up after "Cancelled."
    assert kamailio.routed(call.sip_call_id, "BYE"), kamailio.trace
    level = sox_level(callee.heard())
    assert level.rms > 0.02 and level.maximum > 0.2, level  # speech, decrypted from SRTP
    whole = spoken_seconds(prompt, tmp_path) + spoken_seconds("Cancelled.", tmp_path)
    # The key, pressed as the call was answered, cut the prompt short (by far more than the
    # moment baresip took to send it).
    assert spoken_seconds("Cancelled.", tmp_path) - 0.5 <= level.seconds <= whole - 2, level


MACHINE_GREETING = (
    "Hello, you have reached Sam. I cannot take your call. Leave a message after the tone."
)


@pytest.mark.parametrize("transport", ["tls"], indirect=True)  # its audio decrypted from SRTP
def test_a_message_left_on_a_phones_voicemail_through_the_carrier_edge_ends_whole(
    relay, kamailio, phones, user, tmp_path, transport
):
    """Machine detection (issue 56) on a real phone's audio: baresip answers through the
    edge and sends a voicemail's greeting, a pause and a beep, then a quiet line; Relay,
    asked to leave its message, speaks at once (as to a person), hears a machine, stops,
    and says the message again whole once the beep is over: baresip hears the message once
    cut, once whole."""
    parts = [
        speech_wav(tmp_path / "greeting.wav", MACHINE_GREETING, before=0.2),
        silence_wav(tmp_path / "pause.wav", 0.4),
        tone_wav(tmp_path / "beep.wav", 0.5, 1000),
        silence_wav(tmp_path / "line.wav", 40),
    ]
    machine = tmp_path / "machine.wav"
    subprocess.run([tool("sox"), *map(str, parts), str(machine)], check=True, timeout=60)  # noqa: S603
    callee = phones("callee", number=CALLEE, source=machine, answer=True)
    expected = spoken_seconds(MESSAGE, tmp_path)

    call = submit(user, "interop-amd", MESSAGE, to=CALLEE, machineDetection="leave_message")
    wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=90, what="the call to end")

    assert (call.status, call.failure_reason) == ("completed", ""), relay
    assert call.answered_as == "machine"
    assert call.events.get(kind="detected").data == {"answeredBy": "machine"}
    callee.wait_event("CALL_CLOSED", deadline=10)
    # baresip writes each frame it decodes, and Relay sends nothing while it waits for the
    # beep: the first, cut message and the whole one follow each other in its file.
    heard = sum(end - start for start, end in voiced_spans(callee.heard()))
    assert expected + 0.5 <= heard <= 2 * expected - 0.5, (heard, expected)
