"""Keys during a speech gather (issue 56): the agent's ScriptedTalk on a real RtpStream on
loopback, its far end a UDP socket sending A-law speech and RFC 4733 key presses. With keys
in `input` the first key stops listening (digits win, as in Twilio); with speech alone a key
is not listened for. No transcription is reached (TRANSCRIBE_ENGINE is off in the tests)."""

from __future__ import annotations

import asyncio
import socket
import struct
from types import SimpleNamespace

import pytest

from harness.speech import spoken_alaw
from telephony.scripted import ScriptedTalk
from telephony.sip.rtp import RtpStream
from telephony.speech import Speech, missing_tools

pytestmark = [
    pytest.mark.skipif(bool(missing_tools()), reason="needs espeak-ng and sox"),
    pytest.mark.timeout(60),
]
EVENT = 101  # telephone-event's payload type


class FarEnd:
    """The caller's phone: a UDP socket sending RTP to the agent's stream."""

    def __init__(self, stream: RtpStream) -> None:
        self.stream = stream
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sequence = 0

    def _send(self, payload_type: int, timestamp: int, payload: bytes) -> None:
        self.sequence += 1
        header = struct.pack("!BBHII", 0x80, payload_type, self.sequence, timestamp, 7)
        self.sock.sendto(header + payload, self.stream.sock.get_extra_info("sockname"))

    async def speak(self, alaw: bytes) -> None:
        """`alaw` in 20 ms packets, paced as a phone sends them."""
        for offset in range(0, len(alaw), 160):
            self._send(8, offset, alaw[offset : offset + 160])
            await asyncio.sleep(0.02)

    def press(self, key: int, timestamp: int) -> None:
        """One key press: a start and three end packets (RFC 4733)."""
        self._send(EVENT, timestamp, struct.pack("!BBH", key, 10, 160))
        for _ in range(3):
            self._send(EVENT, timestamp, struct.pack("!BBH", key, 0x80 | 10, 800))


async def gathered(tmp_path, gather: dict, caller) -> tuple[dict, float]:
    """Run a one-gather script on a stream whose far end does `caller(far)`: the gathered
    result, and the seconds the gather took."""
    stream = RtpStream(payload_type=8)
    await stream.open("127.0.0.1", 0)
    stream.dtmf_payload_type = EVENT
    far = FarEnd(stream)
    stream.expect(*far.sock.getsockname())
    reports: list[dict] = []

    async def report(events: list[dict]) -> None:
        reports.extend(events)

    talk = ScriptedTalk(
        script=[{"gather": gather}],
        identity={},
        owner_id=None,
        language="en",
        label="test",
        speech=Speech(tmp_path),
        report=report,
        store=None,
        dialing=None,
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        running = asyncio.ensure_future(talk(SimpleNamespace(stream=stream)))
        await caller(far)
        await asyncio.wait_for(running, 20)
    finally:
        stream.close()
        far.sock.close()
    took = loop.time() - started
    (event,) = [report for report in reports if report["event"] == "gathered"]
    return event["result"], took


async def test_the_first_key_stops_listening_and_digits_win(tmp_path):
    words = spoken_alaw("opening hours")

    async def caller(far: FarEnd) -> None:
        await far.speak(words[: 8000 // 2])  # half a second of the words
        far.press(5, 8000)

    gather = {"input": ["dtmf", "speech"], "numDigits": 1, "timeout": 10, "finishOnKey": "#"}
    gather |= {"speechTimeout": "auto", "hints": [], "language": "en"}
    result, took = await gathered(tmp_path, gather, caller)

    assert result == {"digits": "5", "reason": "numDigits", "speech": "", "confidence": 0.0}
    assert took < 5  # at the key, not at the timeout or the words' end


async def test_a_speech_only_gather_does_not_listen_for_keys(tmp_path):
    async def caller(far: FarEnd) -> None:
        far.press(5, 0)

    gather = {"input": ["speech"], "timeout": 1, "finishOnKey": "#"}
    gather |= {"speechTimeout": "auto", "hints": [], "language": "en"}
    result, took = await gathered(tmp_path, gather, caller)

    assert result == {"digits": "", "reason": "timeout", "speech": "", "confidence": 0.0}
    assert took >= 1  # its timeout ended it, not the key
