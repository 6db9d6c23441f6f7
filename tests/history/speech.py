"""A voicemail message as a real call leaves one: espeak-ng's words in the US English voice
(the transcription model's), rendered to 8 kHz G.711 A-law as the agent renders speech
(telephony.speech), stored as the agent stores a message (telephony.sip.rtp's WAV)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from telephony.sip.rtp import wav_from_g711
from telephony.speech import Speech, missing_tools

A_LAW = 8
VOICE = "en-us"
# The sentence of the accuracy test's ten that the engine hears best (docs/telephony.md:
# WER 0.21); the content words a test expects most of.
SENTENCE = "Good morning this is a reminder that your package will be delivered on Friday"
CONTENT_WORDS = frozenset({"morning", "reminder", "package", "delivered", "friday"})


def spoken_alaw(sentence: str) -> bytes:
    """`sentence` as the A-law audio a caller sends. Skips naming what is missing, except in
    CI, where .ci/run installs espeak-ng and sox."""
    if missing_tools() and not os.environ.get("CI"):
        pytest.skip(f"needs {', '.join(missing_tools())} (Debian: apt-get install espeak-ng sox)")
    with tempfile.TemporaryDirectory() as cache:
        return Speech(Path(cache)).render(sentence, VOICE)[A_LAW]


def spoken_message(sentence: str = SENTENCE) -> tuple[bytes, float]:
    """(the stored WAV, its seconds) of `sentence` spoken over a phone line."""
    alaw = spoken_alaw(sentence)
    return wav_from_g711(alaw, A_LAW), len(alaw) / 8000
