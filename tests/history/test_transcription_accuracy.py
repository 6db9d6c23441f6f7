"""The offline transcript's accuracy on telephone speech, measured (issues 44 and 56).

Ten voicemail-like sentences spoken by espeak-ng and made telephone audio the way a call
delivers them: sox to 8 kHz mono A-law (telephony.speech, as the agent renders a message),
then the WAV file recording_save stores (telephony.sip.rtp.wav_from_g711). Whisper's word
error rate on them, and pocketsphinx's in the same run, are written in docs/telephony.md
("Voicemail transcripts: accuracy"); these tests hold Whisper to at most 0.35 and to at most
half of pocketsphinx's. espeak-ng and sox missing: skipped, except in CI (CI=true), where
they are installed and the tests fail instead.
"""

from __future__ import annotations

import io
import os
import random
import socket
import subprocess
import sys
import threading
import wave
from array import array

import pytest
from django.conf import settings
from django.db import connection

from harness.speech import ACCURACY_SENTENCES, word_errors, words
from history import transcription
from history.transcription import (
    Transcript,
    TranscriptionError,
    WhisperEngine,
    engine_for,
    register_engine,
)
from telephony.sip.rtp import wav_from_g711
from telephony.speech import Speech, missing_tools

pytestmark = [
    pytest.mark.skipif(
        bool(missing_tools()) and not os.environ.get("CI"),
        reason=f"needs {', '.join(missing_tools())} (Debian: apt-get install espeak-ng sox)",
    ),
    # The engine reads no database: the PostgreSQL pass would decode the very same audio
    # again (a minute of CI's CPU under its load).
    pytest.mark.skipif(
        connection.vendor != "sqlite",
        reason="the engine touches no database: the embedded (SQLite) pass runs it",
    ),
]

VOICE = "en-us"  # the model is US English (docs/telephony.md has the British voice's figure)
A_LAW = 8
SENTENCES = ACCURACY_SENTENCES
# Measured (docs/telephony.md): Whisper tiny.en 0.25 to 0.27 (35 to 38 errors in 139 words)
# over renderings that sox dithered each its own way, pocketsphinx 0.64 to 0.67. Relay's sox
# now runs repeatable (-R: its dither seeded), so each run hears the same audio and gets the
# same figures, 0.266 and 0.647 here: never one run in ten failing on a dither's luck. The
# issue's bound for Whisper: at most 0.35, and at most half of pocketsphinx's in the same run.
MAX_WER = 0.35
# "Most" of a sentence's content words: three in five of the words that are not stopwords.
MOST = 0.6
# The words that carry no content of a message.
FUNCTION_WORDS = (
    "a about after am an and any at be before can could for from hey hi i i'm in is it it's "
    "just me my of on please so that the they this to was when will with without you your"
)
STOPWORDS = frozenset(FUNCTION_WORDS.split())


def content_heard(sentence: str, transcript: str) -> float:
    """The share of the sentence's content words (not stopwords) that the transcript holds."""
    content = [word for word in words(sentence) if word not in STOPWORDS]
    heard = set(words(transcript))
    return sum(word in heard for word in content) / len(content)


def wav_of(samples: array, rate: int = 8000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()


@pytest.fixture(scope="module")
def phone_audio(tmp_path_factory) -> list[bytes]:
    """The ten sentences as stored voicemail WAVs, rendered once for the module."""
    speech = Speech(tmp_path_factory.mktemp("speech"))
    return [wav_from_g711(speech.render(s, VOICE)[A_LAW], A_LAW) for s in SENTENCES]


@pytest.fixture(scope="module", params=["whisper", "pocketsphinx"])
def engine(request):
    return engine_for(request.param)


@pytest.fixture(scope="module")
def whisper():
    return engine_for("whisper")


def measured(name: str, transcripts: list[tuple[str, Transcript]]) -> str:
    errors = sum(word_errors(words(s), words(t.text)) for s, t in transcripts)
    total = sum(len(words(s)) for s, _ in transcripts)
    lines = [
        f"{word_errors(words(s), words(t.text)) / len(words(s)):.2f} {t.confidence:.2f} "
        f"{content_heard(s, t.text):.2f} {t.text!r}"
        for s, t in transcripts
    ]
    return (
        f"{name}: WER {errors / total:.3f} ({errors}/{total}); per sentence (WER, confidence, "
        "content words heard, transcript):\n" + "\n".join(lines)
    )


def wer(transcripts: list[tuple[str, Transcript]]) -> float:
    errors = sum(word_errors(words(s), words(t.text)) for s, t in transcripts)
    return errors / sum(len(words(s)) for s, _ in transcripts)


# About 40 s of CPU (ten sentences through both engines), on a core shared with three other
# workers in CI: more than the suite's 120 s when the machine is at its busiest.
@pytest.mark.timeout(480)
def test_whisper_hears_the_sentences_at_most_half_as_wrong_as_pocketsphinx(phone_audio, whisper):
    """One test for the ten sentences through both engines, so that however a run spreads
    tests over workers they are decoded once each (pocketsphinx: about 15 s of CPU)."""
    heard = {
        name: [(s, engine.transcribe(wav)) for s, wav in zip(SENTENCES, phone_audio, strict=True)]
        for name, engine in (("whisper", whisper), ("pocketsphinx", engine_for("pocketsphinx")))
    }
    report = "\n".join(measured(name, transcripts) for name, transcripts in heard.items())
    print(report)  # the figures docs/telephony.md gives, with -s
    whisper_wer, pocketsphinx_wer = wer(heard["whisper"]), wer(heard["pocketsphinx"])
    assert whisper_wer <= MAX_WER, report
    assert whisper_wer <= pocketsphinx_wer / 2, report
    # Every sentence is heard as words, with a confidence that is a probability above
    # nothing's; a known sentence keeps most of its content words.
    assert all(t.text and 0.0 < t.confidence <= 1.0 for _, t in heard["whisper"]), report
    assert max(content_heard(s, t.text) for s, t in heard["whisper"]) >= MOST, report
    # Whisper's text is written as people write: a capital to start, punctuation to end.
    assert all(t.text[0].isupper() and t.text[-1] in ".?!" for _, t in heard["whisper"]), report


def test_silence_and_empty_audio_give_no_words(engine):
    for audio in (array("h", [0] * 8000 * 3), array("h")):
        assert engine.transcribe(wav_of(audio)) == Transcript(text="", confidence=0.0)


def test_noise_gives_no_words_and_no_confidence(engine):
    """Hiss at -21 dBFS: no words, and confidence 0.0, below every sentence's."""
    rng = random.Random(2)
    hiss = array("h", (round(rng.gauss(0, 3000)) for _ in range(8000 * 3)))
    assert engine.transcribe(wav_of(hiss)) == Transcript(text="", confidence=0.0)


def test_a_wav_file_at_another_rate_is_heard_too(whisper, tmp_path, phone_audio):
    """The engine takes any rate and sample format FFmpeg's WAV reader does: the package
    sentence as a 16 kHz, 32-bit WAV (sox from the recording) keeps most of its words."""
    sentence = SENTENCES[2]
    recording = tmp_path / "recording.wav"
    recording.write_bytes(phone_audio[2])
    wide = tmp_path / "wide.wav"
    subprocess.run(["sox", str(recording), "-r", "16000", "-b", "32", str(wide)], check=True)  # noqa: S603, S607
    heard = whisper.transcribe(wide.read_bytes())
    assert content_heard(sentence, heard.text) >= MOST, heard


def test_hints_go_to_whisper_and_pocketsphinx_takes_and_ignores_them(whisper, phone_audio):
    """A speech gather's hints go to Whisper as its prompt, the text it takes to have come
    before, whose style it follows: hints without capitals or punctuation give a transcript
    without them (measured on every rendering; whether a hinted word wins over what tiny.en
    heard varies from one rendering to the next, so that is not held here). pocketsphinx
    takes the same call and ignores them."""
    plain = whisper.transcribe(phone_audio[9])
    hinted = whisper.transcribe(phone_audio[9], hints="address hotel weekend")
    assert plain.text[0].isupper() and plain.text.endswith("?"), plain
    assert hinted.text == hinted.text.lower() and not hinted.text.endswith("?"), hinted
    assert "hotel" in words(hinted.text) and 0.0 < hinted.confidence <= 1.0, hinted
    nothing = wav_of(array("h"))
    assert engine_for("pocketsphinx").transcribe(nothing, hints="bank") == Transcript("", 0.0)


def test_a_message_cut_short_is_heard_as_far_as_it_goes(whisper, phone_audio):
    """A WAV whose data ends before its header says (a recording cut off): the words up to
    the cut, no error."""
    wav = phone_audio[2]
    heard = whisper.transcribe(wav[: 44 + (len(wav) - 44) // 2])
    assert {"morning", "reminder"} <= set(words(heard.text)), heard
    assert "friday" not in words(heard.text), heard


def test_speech_clipped_by_a_loud_line_is_still_heard(whisper, phone_audio):
    """The sentence played eight times too loud, every sample past the 16-bit range cut off
    (a caller shouting into the phone): still most of its words."""
    with wave.open(io.BytesIO(phone_audio[2])) as recording:
        samples = array("h", recording.readframes(recording.getnframes()))
    loud = array("h", (max(-32768, min(32767, sample * 8)) for sample in samples))
    heard = whisper.transcribe(wav_of(loud))
    assert content_heard(SENTENCES[2], heard.text) >= MOST, heard


def test_a_long_message_is_heard_to_its_end(whisper, phone_audio):
    """The ten sentences twice over, one 76 s message: transcribed in pieces of at most 30 s
    (cut in its quietest moments), every piece to its end. Measured WER 0.24 on a 151 s one;
    without timestamps Whisper wrote a fifth of such a message's words."""
    said = " ".join(SENTENCES * 2)
    with wave.open(io.BytesIO(phone_audio[0])) as first:
        rate = first.getframerate()
    samples = array("h")
    for wav in phone_audio * 2:
        with wave.open(io.BytesIO(wav)) as recording:
            samples.frombytes(recording.readframes(recording.getnframes()))
    assert len(samples) / rate > 60

    heard = whisper.transcribe(wav_of(samples, rate))

    errors = word_errors(words(said), words(heard.text))
    assert errors / len(words(said)) <= MAX_WER, heard.text
    # Nothing left out: as many words as were said, give or take, up to the very last.
    assert len(words(heard.text)) >= 0.9 * len(words(said)), heard.text
    assert "weekend" in words(heard.text)[-3:], heard.text


def test_the_model_loads_and_transcribes_without_asking_the_hub(tmp_path, phone_audio):
    """A fresh process loads the bundled model and transcribes with the Hugging Face hub's
    address pointed at a listener on loopback and the hub's offline switch turned off: the
    listener is never called."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    called, done = [], threading.Event()

    def listen():
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            called.append(connection.recv(200))
            connection.close()

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    (tmp_path / "message.wav").write_bytes(phone_audio[2])
    hub = f"http://127.0.0.1:{listener.getsockname()[1]}"
    code = (
        "import sys; from history.transcription import WhisperEngine; "
        "print(WhisperEngine().transcribe(open(sys.argv[1], 'rb').read()).text)"
    )
    try:
        result = subprocess.run(  # noqa: S603 - our own code
            [sys.executable, "-c", code, str(tmp_path / "message.wav")],
            cwd=settings.BASE_DIR,
            env={**os.environ, "HF_ENDPOINT": hub, "HF_HUB_OFFLINE": "0"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        done.set()
        thread.join(timeout=5)
        listener.close()
    assert result.returncode == 0, result.stderr
    assert "delivered" in words(result.stdout), result.stdout
    assert called == []


def test_what_is_not_a_wav_file_is_a_transcription_error(engine):
    with pytest.raises(TranscriptionError):
        engine.transcribe(b"RIFF\x00\x00\x00\x00WAVEnot really")
    with pytest.raises(TranscriptionError):
        engine.transcribe(b"")


def test_off_is_no_engine_and_an_unknown_name_is_refused():
    assert engine_for("off") is None
    assert engine_for("whisper") is engine_for("whisper")
    assert engine_for("pocketsphinx") is engine_for("pocketsphinx")
    assert isinstance(engine_for("whisper"), WhisperEngine)
    with pytest.raises(ValueError, match="unknown transcription engine"):
        engine_for("nonesuch")


def test_a_registered_engine_is_made_once_and_handed_out(monkeypatch):
    class Fixed:
        def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
            return Transcript(text="hello", confidence=1.0)

    monkeypatch.setattr(transcription, "ENGINES", dict(transcription.ENGINES))
    monkeypatch.setattr(transcription, "_made", {})
    register_engine("fixed", Fixed)
    assert isinstance(engine_for("fixed"), Fixed)
    assert engine_for("fixed") is engine_for("fixed")
    assert engine_for("fixed").transcribe(b"") == Transcript(text="hello", confidence=1.0)
