"""The machine detector (telephony.machine_detection) on answers made with espeak-ng and sox
(harness/answers.py): greetings with and without a beep, people answering, a fax, silence,
noise and tones, each with line noise and through mu-law. Measured, not claimed: the share it
gets right, the machines it takes for people, when a message left on a machine would start,
and the CPU it costs."""

from __future__ import annotations

import math
import random
import struct

import pytest

from harness.answers import accuracy, catalogue
from telephony.machine_detection import DECIDE_SECONDS, MachineDetector


@pytest.fixture(scope="session")
def measured(tmp_path_factory):
    """The catalogue made once a session (about 3 s) and classified."""
    return accuracy(tmp_path_factory.mktemp("answers"))


def test_the_set_has_what_the_contract_asks_for():
    labels = [answer.label for answer in catalogue()]

    assert len(labels) >= 30
    assert {"human", "machine", "fax", "unknown"} <= set(labels)
    assert any(a.beep for a in catalogue()) and any(
        a.label == "machine" and not a.beep for a in catalogue()
    )


def test_nine_answers_in_ten_are_classified_as_they_were_made(measured):
    wrong = [(r.answer.name, r.answered_by, r.reason) for r in measured.wrong()]

    assert measured.share_right >= 0.9, wrong
    assert measured.wrong_human_share <= 0.1, wrong


def test_every_decision_comes_within_four_seconds_of_the_answer(measured):
    assert max(r.at for r in measured.results) <= DECIDE_SECONDS
    assert measured.decision_p95 <= DECIDE_SECONDS


def test_a_message_left_after_a_beep_starts_as_the_beep_ends(measured):
    beeped = [r for r in measured.results if r.beep_end is not None and r.answered_by == "machine"]

    assert beeped
    for result in beeped:
        assert result.speak_reason == "beep", result
        assert abs(result.speak_at - result.beep_end) <= 0.1, result


def test_a_message_left_without_a_beep_starts_after_a_second_of_silence(measured):
    quiet = [r for r in measured.results if r.answer.label == "machine" and not r.answer.beep]

    assert quiet
    for result in quiet:
        assert result.speak_reason == "silence", result
        assert result.speak_at > result.at  # the greeting went on after the decision


def test_it_costs_a_hundredth_of_a_core_per_call_at_most(measured):
    # 50 calls on one agent: at most half a core between them.
    assert measured.cpu_per_audio_second <= 0.01, measured.cpu_per_audio_second


# --- bad input: never a hang, never a crash ---------------------------------------------------
def pcm(samples) -> bytes:
    return struct.pack(f"<{len(samples)}h", *samples)


def tone(hz: float, seconds: float, amplitude: int = 12000) -> list[int]:
    return [
        round(amplitude * math.sin(2 * math.pi * hz * n / 8000)) for n in range(int(8000 * seconds))
    ]


def heard(audio: bytes, chunk: int = 320) -> MachineDetector:
    """`audio` fed in chunks of `chunk` bytes (any size: RTP packets need not be 20 ms)."""
    detector = MachineDetector()
    for start in range(0, len(audio), chunk):
        detector.feed(audio[start : start + chunk])
    return detector


noise = random.Random(56)
BAD_INPUT = {
    "digital silence": pcm([0] * 8000 * 6),
    "full-scale square wave": pcm([32767, -32768] * 4000 * 6),
    "loud noise": pcm([noise.randint(-20000, 20000) for _ in range(8000 * 6)]),
    "steady 1 kHz tone": pcm(tone(1000, 6)),
    "steady 2.1 kHz tone, too quiet to be a fax": pcm(tone(2100, 6, amplitude=100)),
    "clipped everything": pcm([32767] * 8000 * 6),
}


@pytest.mark.parametrize("name", BAD_INPUT)
@pytest.mark.parametrize("chunk", [320, 37, 1000])
def test_tone_noise_or_silence_is_unknown_within_four_seconds(name, chunk):
    detector = heard(BAD_INPUT[name], chunk)

    assert detector.decision is not None
    assert (detector.decision.answered_by, detector.decision.at) == ("unknown", DECIDE_SECONDS)
    assert detector.speak_at is None


def test_odd_bytes_and_empty_frames_are_taken_in_stride():
    detector = MachineDetector()
    for frame in (b"", b"\x01", b"\x02\x03\x04", bytes(range(256)) * 2, b"\xff" * 999):
        detector.feed(frame)

    assert detector.frames == (1 + 3 + 512 + 999) // 2 // 160


def test_a_beep_with_nothing_before_it_is_a_machine_and_the_message_starts_at_its_end():
    audio = pcm([0] * 4000 + tone(1400, 0.3) + [0] * 8000)

    detector = heard(audio)

    assert detector.decision.answered_by == "machine"
    assert detector.decision.reason == "beep"
    assert abs(detector.speak_at - 0.8) <= 0.05


def test_a_short_greeting_whose_beep_comes_in_its_silence_is_a_machine():
    # 1.2 s of "speech" (noise that rises and falls four times a second, as syllables do),
    # 0.5 s of quiet, a 0.6 s beep: the beep still sounds when a person's silence would have
    # been long enough.
    rng = random.Random(7)
    voice = [
        round(rng.uniform(-6000, 6000) * (1.05 + math.sin(2 * math.pi * 4 * n / 8000)))
        for n in range(9600)
    ]
    audio = pcm([0] * 2000 + voice + [0] * 4000 + tone(1000, 0.6) + [0] * 12000)

    detector = heard(audio)

    assert (detector.decision.answered_by, detector.decision.reason) == ("machine", "beep")
    assert abs(detector.speak_at - (2000 + 9600 + 4000 + 4800) / 8000) <= 0.05
