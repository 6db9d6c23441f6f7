"""transcribe_rtf: what a voicemail transcript costs, and how right it is (issues 44 and 56).

Each engine runs in a child process of its own, as the worker runs it (spawned, Django set
up; history.tasks): Whisper (the default) and pocketsphinx (the fallback), one after the
other, never at once. In the child the engine is made and its model loaded first (the load is
timed, wall and CPU, as a row of its own), one unmeasured message warms it up, then N
messages of 8 kHz telephone speech are transcribed one after the other, each timed with
time.process_time (the child's CPU, all its threads, whatever else the shared machine runs;
Whisper decodes on one thread, cpu_threads=1). Each message is espeak-ng's voice (`en-us`)
through sox to 8 kHz A-law and recording_save's WAV, as a call's voicemail is stored; its
length is its samples / 8000. Then the accuracy test's ten sentences (harness.speech), the
same audio for both engines, give each engine's word error rate. Last, the child's peak
resident memory (getrusage's ru_maxrss: the model, its buffers and the decoding).

Targets (issue 56): Whisper at most 0.5 s of CPU per second of speech on one core, its child
at most 400 MB, and its word error rate at most 0.35 and at most half of pocketsphinx's.
"""

from __future__ import annotations

import resource
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from bench.report import Row
from bench.scenarios.common import Bench

TARGET = 0.5  # CPU seconds per second of speech
TARGET_MB = 400  # the transcribing child's peak resident memory
TARGET_WER = 0.35  # and at most half of pocketsphinx's
MESSAGES = [
    "Hi this is Sarah calling about the meeting on Tuesday please call me back",
    "Good morning this is a reminder that your package will be delivered on Friday",
    "This is the garage your car is ready and you can pick it up any time after three",
    "The train was cancelled so I will be home around seven tonight, so please keep some "
    "dinner for me and I will call you from the station when I get there",
]
ENGINES = {"whisper": "Whisper tiny.en, int8", "pocketsphinx": "pocketsphinx"}


def _phone_wav(speech, text: str) -> bytes:
    from telephony.sip.rtp import wav_from_g711

    return wav_from_g711(speech.render(text, "en-us")[8], 8)


def _measure(name: str, messages: list[bytes], sentences: list[bytes]) -> dict:
    """In the child: the engine's load, its CPU per message, its transcripts of `sentences`
    and the process's peak RSS."""
    from history.transcription import engine_for

    engine = engine_for(name)
    wall, cpu = time.monotonic(), time.process_time()
    engine.load()
    load_wall, load_cpu = time.monotonic() - wall, time.process_time() - cpu
    engine.transcribe(messages[0])  # warm-up: first-touch pages of the model, caches
    timed = []
    for wav in messages[1:]:
        start = time.process_time()
        transcript = engine.transcribe(wav)
        timed.append(((len(wav) - 44) / 2 / 8000, time.process_time() - start, transcript.text))
    heard = [engine.transcribe(wav).text for wav in sentences]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: kilobytes
    return {
        "load_wall": load_wall,
        "load_cpu": load_cpu,
        "timed": timed,
        "heard": heard,
        "peak_mb": peak_kb / 1024,
    }


def _in_child(name: str, messages: list[bytes], sentences: list[bytes]) -> dict:
    import django

    with ProcessPoolExecutor(
        max_workers=1, mp_context=get_context("spawn"), initializer=django.setup
    ) as child:
        return child.submit(_measure, name, messages, sentences).result()


def transcribe_rtf(b: Bench) -> None:
    from harness.speech import ACCURACY_SENTENCES, word_error_rate
    from telephony.speech import Speech

    # The full profile scores the ten sentences; the smoke profile two (CI's time is short).
    said = ACCURACY_SENTENCES if b.profile.transcribe_messages >= 10 else ACCURACY_SENTENCES[:2]
    with tempfile.TemporaryDirectory() as cache:
        speech = Speech(Path(cache))
        messages = [
            _phone_wav(speech, MESSAGES[n % len(MESSAGES)])
            for n in range(b.profile.transcribe_messages + 1)
        ]
        sentences = [_phone_wav(speech, text) for text in said]
    results = {name: _in_child(name, messages, sentences) for name in ENGINES}
    wer = {
        name: word_error_rate(list(zip(said, result["heard"], strict=True)))
        for name, result in results.items()
    }
    for name, result in results.items():
        _rows(b, name, result, wer)


def _rows(b: Bench, name: str, result: dict, wer: dict[str, float]) -> None:
    seconds = sum(length for length, _, _ in result["timed"])
    cpu = sum(spent for _, spent, _ in result["timed"])
    per_message = [spent / length for length, spent, _ in result["timed"]]
    words = sum(len(text.split()) for _, _, text in result["timed"])
    rtf = cpu / seconds
    whisper = name == "whisper"
    note = (
        f"{len(per_message)} messages, {seconds:.1f} s of speech, {cpu:.1f} s of CPU; "
        f"per message {min(per_message):.2f} to {max(per_message):.2f}; {words} words heard"
    )
    label = ENGINES[name]
    b.add(Row("transcribe_rtf", f"CPU per second of 8 kHz speech ({label}, one core)", rtf,
              "s/s", target=f"<= {TARGET} s/s" if whisper else "",
              met=rtf <= TARGET if whisper else None, note=note))  # fmt: skip
    b.add(Row("transcribe_rtf", f"model load, once per process ({label})",
              result["load_wall"] * 1000, "ms",
              note=f"{result['load_cpu'] * 1000:.0f} ms CPU"))  # fmt: skip
    b.add(Row("transcribe_rtf", f"transcribing child's peak RSS ({label})", result["peak_mb"],
              "MB", target=f"<= {TARGET_MB} MB" if whisper else "",
              met=result["peak_mb"] <= TARGET_MB if whisper else None))  # fmt: skip
    count = len(result["heard"])
    if whisper:
        bound = min(TARGET_WER, wer["pocketsphinx"] / 2)
        b.add(Row("transcribe_rtf", f"word error rate, {count} sentences ({label})",
                  wer[name], "", target=f"<= {TARGET_WER} and <= half of pocketsphinx's",
                  met=wer[name] <= bound,
                  note=f"pocketsphinx {wer['pocketsphinx']:.2f} on the same audio"))  # fmt: skip
    else:
        b.add(Row("transcribe_rtf", f"word error rate, {count} sentences ({label})",
                  wer[name], ""))  # fmt: skip
