"""A speech gather's listening (issue 56): the agent's ScriptedTalk on a real RtpStream on
loopback, its far end a UDP socket sending A-law speech, silence and RFC 4733 key presses.
With keys in `input` the first key stops listening (digits win, as in Twilio); with speech
alone a key is not listened for (no transcription is reached: TRANSCRIBE_ENGINE is off in
the suite). With Whisper on, the transcription starts while the caller is quiet, before the
speechTimeout ends the utterance, and is dropped when the caller speaks again."""

from __future__ import annotations

import asyncio
import socket
import struct
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from harness.speech import spoken_alaw, voiced, words
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
            self._send(8, self.sequence * 160, alaw[offset : offset + 160])
            await asyncio.sleep(0.02)

    async def quiet(self, seconds: float) -> None:
        """A quiet line for `seconds`: A-law silence, paced."""
        await self.speak(b"\xd5" * round(seconds * 8000))

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


def early(outcome: str) -> float:
    return (
        REGISTRY.get_sample_value("relay_speech_early_transcripts_total", {"outcome": outcome})
        or 0.0
    )


@pytest.fixture
def whisper(settings):
    settings.TRANSCRIBE_ENGINE = "whisper"


SPEECH_GATHER = {"input": ["speech"], "timeout": 10, "speechTimeout": "auto", "hints": []}


@pytest.mark.usefixtures("whisper")
async def test_the_words_are_transcribed_while_the_caller_is_quiet_and_used(tmp_path):
    used, dropped = early("used"), early("dropped")

    async def caller(far: FarEnd) -> None:
        await far.speak(spoken_alaw("Good morning, I am calling about my delivery"))
        await far.quiet(2)

    result, _ = await gathered(tmp_path, SPEECH_GATHER | {"language": "en"}, caller)

    assert result["reason"] == "speech"
    assert {"morning", "delivery"} <= set(words(result["speech"]))
    assert (early("used") - used, early("dropped") - dropped) == (1, 0)


@pytest.mark.usefixtures("whisper")
async def test_a_caller_who_pauses_and_goes_on_is_heard_whole(tmp_path):
    """Seven tenths of a second of quiet mid-sentence (more than the half second that starts a
    transcription, less than the second that ends the utterance): the early words are
    dropped, and the result holds what came after the pause too."""
    used, dropped = early("used"), early("dropped")

    async def caller(far: FarEnd) -> None:
        await far.speak(voiced(spoken_alaw("Good morning")))
        await far.quiet(0.7)
        await far.speak(voiced(spoken_alaw("I am calling about my delivery")))
        await far.quiet(2)

    result, _ = await gathered(tmp_path, SPEECH_GATHER | {"language": "en"}, caller)

    assert {"morning", "delivery"} <= set(words(result["speech"]))
    assert early("used") - used == 1
    assert early("dropped") - dropped >= 1
