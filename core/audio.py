"""Audio a user uploads, made into what calls play (issue 58's music on hold): a WAV file of
any rate, sample width and channels that sox reads, checked and converted to 8 kHz, 16-bit
PCM, mono, the form every recording of Relay's is kept in."""

from __future__ import annotations

import logging
import subprocess
import tempfile
import wave
from pathlib import Path

from core.errors import InvalidRequest

logger = logging.getLogger(__name__)

# The media types a WAV file is sent as (RFC 2361's audio/vnd.wave, and those in use).
WAV_MEDIA_TYPES = frozenset({"audio/wav", "audio/wave", "audio/x-wav", "audio/vnd.wave"})
RATE = 8000
CONVERSION_TIMEOUT = 60  # seconds sox may take; a 10 MiB file takes well under one


def _refused(message: str) -> InvalidRequest:
    return InvalidRequest(message, fields={"file": [message]})


def wav_for_calls(data: bytes, *, max_seconds: float) -> tuple[bytes, float]:
    """`data`, a WAV file, as a WAV file at 8 kHz, 16-bit, mono, and its length in seconds.
    InvalidRequest (naming the field `file`) when it is not a WAV file sox can read, holds
    no audio, or is longer than `max_seconds` (sox stops reading a moment after it, so a file
    that claims hours is never decoded whole)."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise _refused("Not a WAV file (RIFF/WAVE).")
    with tempfile.TemporaryDirectory() as work:
        converted = Path(work) / "converted.wav"
        argv = [
            "sox", "-R", "-V1", "-t", "wav", "-",
            "-r", str(RATE), "-b", "16", "-c", "1", "-e", "signed-integer", "-t", "wav",
            str(converted), "trim", "0", str(max_seconds + 1),
        ]  # fmt: skip
        try:
            subprocess.run(  # noqa: S603 - a fixed program, the file on stdin
                argv, input=data, capture_output=True, check=True, timeout=CONVERSION_TIMEOUT
            )
            with wave.open(str(converted), "rb") as audio:
                frames = audio.getnframes()
            out = converted.read_bytes()
        except subprocess.CalledProcessError:
            raise _refused("A WAV file that cannot be read (its header or its data).") from None
        except (OSError, subprocess.SubprocessError, wave.Error, EOFError) as exc:
            logger.warning("a WAV file could not be converted: %s", type(exc).__name__)
            raise _refused("A WAV file that cannot be read (its header or its data).") from None
    seconds = frames / RATE
    if frames == 0:
        raise _refused("The WAV file holds no audio.")
    if seconds > max_seconds:
        raise _refused(f"Longer than {max_seconds:g} seconds.")
    return out, round(seconds, 2)
