"""Relay's default music on hold: a short melody made here, note by note, from sine waves,
so that nothing recorded or composed by anyone else ships with Relay (docs/decisions.md).

The melody is sixteen notes of the C major pentatonic scale, written for Relay, each a
sine with a quieter octave above it, struck softly (10 ms) and fading like a music box's,
at about -12 dBFS at its peak: 8 seconds, played again and again to a held party
(rtp.RtpStream.start_music). `melody()` is its 16-bit samples at 8 kHz, mono; to hear it,
`python -c "from telephony.sip.music import wav; open('moh.wav', 'wb').write(wav())"`.
"""

from __future__ import annotations

import io
import math
import struct
import wave
from functools import cache

RATE = 8000
NOTE_SECONDS = 0.5
PEAK = 0.25  # of full scale: about -12 dBFS, well below speech at its loudest
# C5 D5 E5 G5 A5 C6 (Hz), and the tune in steps of that scale, 0 being C5.
SCALE = (523.25, 587.33, 659.26, 783.99, 880.00, 1046.50)
TUNE = (0, 2, 4, 3, 2, 1, 2, 0, 4, 5, 4, 3, 2, 3, 1, 0)


def _note(hz: float) -> list[float]:
    samples = []
    count = int(NOTE_SECONDS * RATE)
    attack = int(0.01 * RATE)
    for n in range(count):
        t = n / RATE
        envelope = min(1.0, n / attack) * math.exp(-3.5 * t)
        tone = math.sin(2 * math.pi * hz * t) + 0.3 * math.sin(4 * math.pi * hz * t)
        samples.append(envelope * tone / 1.3)
    return samples


@cache
def melody() -> tuple[int, ...]:
    """The melody's samples: 16-bit, 8 kHz, mono."""
    return tuple(round(PEAK * 32767 * sample) for step in TUNE for sample in _note(SCALE[step]))


def wav() -> bytes:
    """The melody as a WAV file (8 kHz, 16-bit, mono)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(struct.pack(f"<{len(melody())}h", *melody()))
    return buffer.getvalue()
