"""Speech and audio for the live tests and the bench, made and measured by espeak-ng and sox:
a voicemail message as a real call leaves one (`spoken_message`), the WAV files baresip speaks
(`speech_wav`, `silence_wav`), how loud and long what it heard was (`sox_level`), and how far
a transcript is from what was said (`ACCURACY_SENTENCES`, `words`, `word_errors`: the
transcription accuracy test's and the transcribe_rtf bench's).

A spoken message is espeak-ng's words in the US English voice (the transcription model's),
rendered to 8 kHz G.711 A-law as the agent renders speech (telephony.speech), stored as the
agent stores a message (telephony.sip.rtp's WAV). Without espeak-ng or sox it fails naming
them (telephony.speech.missing_tools); a test skips on that first, off CI.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import wave
from array import array
from dataclasses import dataclass
from pathlib import Path

from harness.live import tool
from telephony.sip.rtp import pcm_from_g711, wav_from_g711
from telephony.speech import Speech, missing_tools
from telephony.vad import FRAME, MAX_ZCR, VOICE_RMS, frame_features

A_LAW = 8
VOICE = "en-us"
# The sentence of the accuracy test's ten that pocketsphinx hears best (docs/telephony.md:
# WER 0.21; Whisper hears it whole).
SENTENCE = "Good morning this is a reminder that your package will be delivered on Friday"
# Ten voicemail-like sentences: tests/history/test_transcription_accuracy.py and the bench's
# transcribe_rtf measure a transcript's word error rate on them (docs/telephony.md).
ACCURACY_SENTENCES = [
    "Hi this is Sarah calling about the meeting on Tuesday please call me back",
    "Hello it's David from the dentist your appointment is tomorrow at ten in the morning",
    SENTENCE,
    "Hey it's Mom just checking that you got home safely give me a call when you can",
    "This is the garage your car is ready and you can pick it up any time after three",
    "Hi John I am running late for dinner so please start without me",
    "Please call the bank as soon as possible about your account",
    "I wanted to thank you for the lovely flowers they arrived this morning",
    "The train was cancelled so I will be home around seven tonight",
    "Could you send me the address of the hotel before the weekend",
]
# Whisper writes numbers as digits ("at 10 in the morning") and American spellings; the
# sentences spell them as words, the British way. A word error rate compares words, not
# spellings (Whisper's paper scores through a normaliser for the same reason), so both sides
# are put in one spelling first. Only what the ten sentences need.
SPELLING = {"3": "three", "7": "seven", "10": "ten", "canceled": "cancelled", "mum": "mom"}


def words(text: str) -> list[str]:
    """`text`'s words, lower-case, without punctuation (apostrophes kept), in one spelling."""
    return [SPELLING.get(w, w) for w in re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()]


def word_errors(reference: list[str], heard: list[str]) -> int:
    """Substitutions, deletions and insertions: the word-level Levenshtein distance."""
    row = list(range(len(heard) + 1))
    for i, said in enumerate(reference, 1):
        diagonal, row[0] = row[0], i
        for j, word in enumerate(heard, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (said != word))
    return row[-1]


def word_error_rate(pairs: list[tuple[str, str]]) -> float:
    """Word errors over words said, for (said, heard) pairs."""
    errors = sum(word_errors(words(said), words(heard)) for said, heard in pairs)
    return errors / sum(len(words(said)) for said, _ in pairs)


def spoken_alaw(sentence: str = SENTENCE) -> bytes:
    """`sentence` as the A-law audio a caller sends."""
    if missing := missing_tools():
        raise RuntimeError(f"needs {', '.join(missing)} (Debian: apt-get install espeak-ng sox)")
    with tempfile.TemporaryDirectory() as cache:
        return Speech(Path(cache)).render(sentence, VOICE)[A_LAW]


def voiced(alaw: bytes) -> bytes:
    """A-law speech from its first voice frame to its last, as Relay's voice detector tells
    voice (telephony.vad: loud, and not hiss): without the quiet espeak-ng leaves at each end,
    and without a last unvoiced sound, which the detector does not count as voice either."""
    pcm = array("h", pcm_from_g711(alaw, A_LAW))
    features = [frame_features(pcm[n * FRAME : (n + 1) * FRAME]) for n in range(len(pcm) // FRAME)]
    loud = [n for n, (rms, zcr) in enumerate(features) if rms >= VOICE_RMS and zcr <= MAX_ZCR]
    return alaw[loud[0] * FRAME : (loud[-1] + 1) * FRAME] if loud else alaw


def spoken_message(sentence: str = SENTENCE) -> tuple[bytes, float]:
    """(the stored WAV, its seconds) of `sentence` spoken over a phone line."""
    alaw = spoken_alaw(sentence)
    return wav_from_g711(alaw, A_LAW), len(alaw) / 8000


@dataclass
class Level:
    seconds: float
    rms: float
    maximum: float


def sox_level(path: Path) -> Level:
    """`sox <wav> -n stat`: length in seconds, RMS and maximum amplitude (0 to 1)."""
    result = subprocess.run(  # noqa: S603 - a fixed command on our own file
        [tool("sox"), str(path), "-n", "stat"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )

    def value(name: str) -> float:
        found = re.search(rf"^{re.escape(name)}:\s+(-?[\d.]+)", result.stderr, re.MULTILINE)
        assert found, f"sox stat printed no {name!r}: {result.stderr}"
        return float(found.group(1))

    return Level(value("Length (seconds)"), value("RMS     amplitude"), value("Maximum amplitude"))


def speech_wav(path: Path, text: str, *, before: float = 0.0, after: float = 0.0) -> Path:
    """`text` spoken by espeak-ng, as baresip's aufile wants it (8 kHz, mono, 16-bit), with
    `before` and `after` seconds of silence around it."""
    raw = path.with_suffix(".espeak.wav")
    subprocess.run(  # noqa: S603
        [tool("espeak-ng"), "-v", "en", "-w", str(raw), text], check=True, timeout=60
    )
    subprocess.run(  # noqa: S603
        [
            tool("sox"), str(raw), "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer",
            str(path), "pad", str(before), str(after),
        ],
        check=True,
        timeout=60,
    )  # fmt: skip
    raw.unlink()
    return path


def silence_wav(path: Path, seconds: float) -> Path:
    subprocess.run(  # noqa: S603
        [
            tool("sox"), "-n", "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer",
            str(path), "trim", "0", str(seconds),
        ],
        check=True,
        timeout=60,
    )  # fmt: skip
    return path


def tone_wav(path: Path, seconds: float, hz: float) -> Path:
    """A steady sine of `hz` (a voicemail's beep, a fax's tone), 8 kHz mono 16-bit."""
    subprocess.run(  # noqa: S603
        [
            tool("sox"), "-n", "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer",
            str(path), "synth", str(seconds), "sine", str(hz), "vol", "0.4",
        ],
        check=True,
        timeout=60,
    )  # fmt: skip
    return path


def voiced_spans(path: Path, *, quiet: int = 328, gap: float = 0.3) -> list[tuple[float, float]]:
    """The (start, end) seconds of each stretch of sound in a 16-bit mono WAV: 20 ms frames
    whose peak reaches `quiet` (-40 dBFS), those less than `gap` apart joined."""
    with wave.open(str(path)) as audio:
        rate, frames = audio.getframerate(), audio.readframes(audio.getnframes())
    samples = array("h", frames)
    step = rate // 50
    loud = [
        n / 50
        for n in range(len(samples) // step)
        if max(map(abs, samples[n * step : (n + 1) * step])) >= quiet
    ]
    spans: list[tuple[float, float]] = []
    for start in loud:
        if spans and start - spans[-1][1] < gap:
            spans[-1] = (spans[-1][0], start + 0.02)
        else:
            spans.append((start, start + 0.02))
    return spans
