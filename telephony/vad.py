"""An utterance found in a caller's audio by its energy: a speech gather's end of speech.

Pure Python, no model: 8 kHz 16-bit mono PCM (G.711 decoded) in 20 ms frames. A frame is
voice when it is loud (its RMS at least VOICE_RMS, and RATIO times the line's noise floor,
learnt from the frames that are not voice) and not hiss (its zero-crossing rate at most
MAX_ZCR: white noise crosses zero at about half its samples, vowels at a fifth or less).
The utterance starts at START_FRAMES voice frames in a row (a click is not speech) and ends
after `silence` seconds without a voice frame, or `max_seconds` after it started. Its audio
keeps PRE_ROLL seconds before the start (an unvoiced first sound, the s of "sales") and
POST_ROLL after the last voice frame.

Time here is the audio's own (frames fed), so a test gets the same answer on any machine;
the caller bounds the wall-clock wait (a caller who sends no packets at all).
"""

from __future__ import annotations

import math
from array import array

RATE = 8000
FRAME = 160  # samples: 20 ms
FRAME_SECONDS = FRAME / RATE
VOICE_RMS = 330.0  # about -40 dBFS
RATIO = 3.0  # about 10 dB over the noise floor
MAX_ZCR = 0.35
START_FRAMES = 4  # 80 ms
PRE_ROLL = 0.3
POST_ROLL = 0.3
FLOOR_WEIGHT = 0.05  # how fast the noise floor follows the frames that are not voice


def frame_features(frame: array) -> tuple[float, float]:
    """(RMS, zero-crossing rate) of one frame of samples."""
    if not frame:
        return 0.0, 0.0
    energy = sum(sample * sample for sample in frame)
    crossings = sum(
        1 for before, after in zip(frame, frame[1:], strict=False) if (before < 0) != (after < 0)
    )
    return math.sqrt(energy / len(frame)), crossings / max(1, len(frame) - 1)


class VoiceDetector:
    """Feed PCM as it arrives (`feed`); `started` once an utterance began, `ended` once it
    is over; `utterance()` its PCM."""

    def __init__(self, *, silence: float, max_seconds: float = 30.0) -> None:
        self.silence_frames = max(1, round(silence / FRAME_SECONDS))
        self.max_frames = round(max_seconds / FRAME_SECONDS)
        self.pcm = bytearray()
        self._pending = b""
        self.frames = 0  # frames seen
        self.floor = VOICE_RMS / RATIO
        self.run = 0  # voice frames in a row
        self.start: int | None = None  # the frame the utterance started at
        self.last_voice: int | None = None
        self.ended = False

    @property
    def started(self) -> bool:
        return self.start is not None

    @property
    def quiet_seconds(self) -> float:
        """How long the utterance has been quiet since its last voice frame (0 before it
        started): from POST_ROLL on, `utterance()` stays what it is unless voice comes back."""
        if self.last_voice is None or self.start is None:
            return 0.0
        return (self.frames - 1 - self.last_voice) * FRAME_SECONDS

    def feed(self, pcm: bytes) -> bool:
        """Take more audio; whether the utterance has ended."""
        if self.ended:
            return True
        self.pcm += pcm
        data = self._pending + pcm
        whole = len(data) - len(data) % (2 * FRAME)
        self._pending = data[whole:]
        for offset in range(0, whole, 2 * FRAME):
            if self._frame(array("h", data[offset : offset + 2 * FRAME])):
                self.ended = True
                break
        return self.ended

    def _frame(self, frame: array) -> bool:
        index = self.frames
        self.frames += 1
        rms, zcr = frame_features(frame)
        voice = rms >= max(VOICE_RMS, self.floor * RATIO) and zcr <= MAX_ZCR
        if voice:
            self.run += 1
            self.last_voice = index
            if self.start is None and self.run >= START_FRAMES:
                self.start = index - START_FRAMES + 1
        else:
            self.run = 0
            self.floor += (rms - self.floor) * FLOOR_WEIGHT
        if self.start is None:
            return False
        return (
            index - self.last_voice >= self.silence_frames or index - self.start >= self.max_frames
        )

    def utterance(self) -> bytes:
        """The utterance's PCM (with its pre- and post-roll); b"" when none started."""
        if self.start is None:
            return b""
        first = max(0, self.start - round(PRE_ROLL / FRAME_SECONDS)) * FRAME
        last = (self.last_voice + 1 + round(POST_ROLL / FRAME_SECONDS)) * FRAME
        return bytes(self.pcm[2 * first : 2 * last])
