"""A speech gather's transcription (issue 56, telephony.listening): in a child process of
the agent, bounded, a failure being no speech. With Whisper, Relay's default engine."""

from __future__ import annotations

import asyncio
import os

import pytest

from harness.speech import spoken_alaw
from telephony import listening
from telephony.listening import NOTHING, transcribe
from telephony.sip.rtp import LINEAR
from telephony.speech import missing_tools

pytestmark = pytest.mark.skipif(bool(missing_tools()), reason="needs espeak-ng and sox")


def pcm_of(words: str) -> bytes:
    return b"".join(map(LINEAR[8].__getitem__, spoken_alaw(words)))


def heard(pcm: bytes, engine: str = "whisper"):
    return asyncio.run(transcribe(pcm, engine=engine, hints=["opening hours"], label="test"))


def test_words_are_transcribed_in_a_child_process():
    words = heard(pcm_of("opening hours"))

    assert "opening" in words.text.lower() and 0 < words.confidence <= 1
    child = listening._the_pool().submit(os.getpid).result(timeout=30)
    assert child != os.getpid()  # the pool's one worker, not this process


def test_nothing_to_hear_or_no_engine_is_no_speech():
    assert heard(b"") == NOTHING
    assert heard(pcm_of("opening hours"), engine="off") == NOTHING


def test_a_transcription_over_its_time_is_no_speech_and_the_next_gets_a_new_child(
    monkeypatch,
):
    heard(pcm_of("opening hours"))  # the child is up, its model loaded
    before = listening._pool
    monkeypatch.setattr(listening, "TRANSCRIBE_TIMEOUT", 0.001)

    assert heard(pcm_of("opening hours")) == NOTHING
    assert listening._pool is None  # given up

    monkeypatch.setattr(listening, "TRANSCRIBE_TIMEOUT", 60.0)
    again = heard(pcm_of("opening hours"))
    assert "opening" in again.text.lower()
    assert listening._pool is not before


def test_a_speech_gather_begun_starts_the_child_and_its_model_before_the_utterance(
    monkeypatch,
):
    monkeypatch.setattr(listening, "_pool", None)
    listening.warm("off")
    assert listening._pool is None  # no engine, no child

    # The utterance's budget is the next test's: here the model loads first in the child, and
    # on a loaded machine that and the utterance together may take more than its 10 s.
    monkeypatch.setattr(listening, "TRANSCRIBE_TIMEOUT", 60.0)
    listening.warm("whisper")
    pool = listening._pool
    assert pool is not None
    # The load went first in the child; the utterance after it is heard by that child.
    assert "opening" in heard(pcm_of("opening hours")).text.lower()
    assert listening._pool is pool
