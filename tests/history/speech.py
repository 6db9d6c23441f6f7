"""The spoken voicemail message the history's, the mail's and the Matrix bot's tests hear
(harness.speech makes it): the words its transcript must mostly hold, the transcript's words
as a test compares them, and the skip for a machine without espeak-ng and sox."""

from __future__ import annotations

import os

import pytest

from harness.speech import words
from telephony.speech import missing_tools

# The content words of harness.speech.SENTENCE, of which a test expects most in a transcript.
CONTENT_WORDS = frozenset({"morning", "reminder", "package", "delivered", "friday"})


def heard_words(transcript: str) -> set[str]:
    """The transcript's words, lower-case and without punctuation: Whisper writes
    "Good morning, ... on Friday." and the words are what a test compares."""
    return set(words(transcript))


def require_speech() -> None:
    """Skips the test off CI when espeak-ng or sox is missing; in CI (.ci/run installs them)
    the test goes on, and fails naming them."""
    if missing_tools() and not os.environ.get("CI"):
        pytest.skip(f"needs {', '.join(missing_tools())} (Debian: apt-get install espeak-ng sox)")
