"""transcribe_rtf: what a voicemail transcript costs in CPU, per second of speech (issue 44).

In the harness process, on one core (pocketsphinx holds the GIL, so one decode is one core):
the pocketsphinx engine is made and its model loaded first (the load is timed, wall and
CPU, as a row of its own), one unmeasured message warms it up, then N messages of 8 kHz
telephone speech are transcribed one after the other, each timed with time.process_time
(this process's CPU, whatever else the shared machine runs). Each message is espeak-ng's
voice (`en-us`) through sox to 8 kHz A-law and recording_save's WAV, as a call's voicemail
is stored; its length is its samples / 8000. Target: at most 0.5 s of CPU per second of
speech.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.report import Row
from bench.scenarios.common import Bench

TARGET = 0.5  # CPU seconds per second of speech
MESSAGES = [
    "Hi this is Sarah calling about the meeting on Tuesday please call me back",
    "Good morning this is a reminder that your package will be delivered on Friday",
    "This is the garage your car is ready and you can pick it up any time after three",
    "The train was cancelled so I will be home around seven tonight, so please keep some "
    "dinner for me and I will call you from the station when I get there",
]


def transcribe_rtf(b: Bench) -> None:
    from history.transcription import PocketsphinxEngine
    from telephony.sip.rtp import wav_from_g711
    from telephony.speech import Speech

    with tempfile.TemporaryDirectory() as cache:
        speech = Speech(Path(cache))
        wavs = [
            wav_from_g711(speech.render(MESSAGES[n % len(MESSAGES)], "en-us")[8], 8)
            for n in range(b.profile.transcribe_messages + 1)
        ]
    engine = PocketsphinxEngine()
    wall, cpu = time.monotonic(), time.process_time()
    engine.load()
    load_wall, load_cpu = time.monotonic() - wall, time.process_time() - cpu
    engine.transcribe(wavs[0])  # warm-up: first-touch pages of the model, caches
    seconds = cpu = 0.0
    words = 0
    per_message = []
    for wav in wavs[1:]:
        length = (len(wav) - 44) / 2 / 8000  # 16-bit mono samples after the 44-byte header
        start = time.process_time()
        transcript = engine.transcribe(wav)
        spent = time.process_time() - start
        seconds, cpu, words = seconds + length, cpu + spent, words + len(transcript.text.split())
        per_message.append(spent / length)
    rtf = cpu / seconds
    note = (
        f"{len(per_message)} messages, {seconds:.1f} s of speech, {cpu:.1f} s of CPU; "
        f"per message {min(per_message):.2f} to {max(per_message):.2f}; {words} words heard"
    )
    b.add(Row("transcribe_rtf", "CPU per second of 8 kHz speech (pocketsphinx, one core)",
              rtf, "s/s", target=f"<= {TARGET} s/s", met=rtf <= TARGET, note=note))  # fmt: skip
    b.add(Row("transcribe_rtf", "model load, once per process", load_wall * 1000, "ms",
              note=f"{load_cpu * 1000:.0f} ms CPU"))  # fmt: skip
