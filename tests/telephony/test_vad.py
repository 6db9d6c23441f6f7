"""The speech gather's voice detector (issue 56, telephony.vad) on synthetic audio: words
spoken by espeak-ng through A-law as a caller sends them, silence, hiss and a click. Time
here is the audio's own, so each answer is exact."""

from __future__ import annotations

import math
import random
from array import array

import pytest

from harness.speech import spoken_alaw
from telephony.sip.rtp import LINEAR
from telephony.speech import missing_tools
from telephony.vad import FRAME_SECONDS, PRE_ROLL, VoiceDetector

RATE = 8000
pytestmark = pytest.mark.skipif(bool(missing_tools()), reason="needs espeak-ng and sox")


def pcm_of(alaw: bytes) -> bytes:
    return b"".join(map(LINEAR[8].__getitem__, alaw))


def silence(seconds: float) -> bytes:
    return bytes(2 * round(seconds * RATE))


def noise(seconds: float, rms: float, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    return array("h", (int(rng.gauss(0, rms)) for _ in range(round(seconds * RATE)))).tobytes()


def fed(audio: bytes, detector: VoiceDetector, *, packet: int = 320) -> float | None:
    """Feed `audio` in packets of 20 ms, as RTP brings it: the seconds fed when the
    utterance ended, or None when it did not."""
    for offset in range(0, len(audio), packet):
        if detector.feed(audio[offset : offset + packet]):
            return (offset + packet) / 2 / RATE
    return None


def test_words_start_an_utterance_that_ends_after_the_silence_named():
    words = pcm_of(spoken_alaw("opening hours"))
    spoken = len(words) / 2 / RATE
    detector = VoiceDetector(silence=1.0)

    ended = fed(silence(1.0) + words + silence(3.0), detector)

    assert detector.started
    assert 1.0 <= detector.start * FRAME_SECONDS <= 1.3  # at the words, not before
    assert ended is not None
    # Ended by a second of silence after the last voice, within the words' audio (espeak-ng
    # ends its words with a little quiet), not at the audio's end.
    last_voice = (detector.last_voice + 1) * FRAME_SECONDS
    assert 1.0 + spoken / 2 <= last_voice <= 1.0 + spoken
    assert ended == pytest.approx(last_voice + 1.0, abs=0.03)
    utterance = detector.utterance()
    # The words, with a little before and after them: not the silence around.
    assert spoken <= len(utterance) / 2 / RATE <= spoken + 2 * PRE_ROLL + 0.1


def test_a_longer_speech_timeout_waits_through_a_pause_between_words():
    yes = pcm_of(spoken_alaw("yes"))
    audio = yes + silence(1.5) + pcm_of(spoken_alaw("please")) + silence(4.0)

    short, long = VoiceDetector(silence=1.0), VoiceDetector(silence=2.0)
    ended_short, ended_long = fed(audio, short), fed(audio, long)

    assert ended_short is not None and ended_long is not None
    assert ended_short < len(yes) / 2 / RATE + 1.3  # the pause ended it
    assert ended_long > len(yes) / 2 / RATE + 1.5  # it heard "please" too


@pytest.mark.parametrize(
    "audio",
    [
        silence(6.0),
        noise(6.0, 1000),  # hiss at about -30 dBFS
        noise(6.0, 3000, seed=1),  # loud hiss, about -21 dBFS
        silence(1.0) + noise(0.04, 8000) + silence(5.0),  # a click of 40 ms
    ],
    ids=["silence", "hiss", "loud-hiss", "click"],
)
def test_no_voice_starts_no_utterance(audio):
    detector = VoiceDetector(silence=1.0)

    assert fed(audio, detector) is None
    assert not detector.started and detector.utterance() == b""


def test_words_over_line_hiss_are_heard():
    words = pcm_of(spoken_alaw("opening hours"))
    hiss = noise(1.0 + len(words) / 2 / RATE + 2.0, 300)
    speech = silence(1.0) + words + silence(2.0)
    mixed = array("h", speech)
    for index, sample in enumerate(array("h", hiss)):
        mixed[index] = max(-32768, min(32767, mixed[index] + sample))
    detector = VoiceDetector(silence=1.0)

    assert fed(mixed.tobytes(), detector) is not None
    assert 0.9 <= detector.start * FRAME_SECONDS <= 1.3


def test_an_utterance_is_cut_at_its_maximum():
    tone = array(
        "h", (int(8000 * math.sin(2 * math.pi * 200 * n / RATE)) for n in range(RATE * 5))
    ).tobytes()  # a voice that never stops: a steady 200 Hz hum
    detector = VoiceDetector(silence=1.0, max_seconds=2.0)

    ended = fed(tone, detector)

    assert ended is not None and 2.0 <= ended <= 2.2
