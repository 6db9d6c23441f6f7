"""The message as audio: synthesized offline by espeak-ng, converted by sox to 8 kHz mono
G.711 (both laws, so either codec the callee picks is ready), cached by (engine, voice, text).

The cache is files under TTS_CACHE_DIR, written atomically, so every agent process shares it
and a restart keeps it; a small in-memory layer saves re-reading hot messages. Each use marks
a message's files used (their mtime, at most once a minute for one kept in memory), and
`cache_trim` (purge_expired) removes the messages used longest ago once the cache is past
TTS_CACHE_MAX_MB, never one used recently enough that a live call may be playing it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

ENGINE = "espeak-ng"
MEMORY_ENTRIES = 64
USE_MARK_INTERVAL = 60.0  # seconds between marks on disk of a message used from memory
SYNTHESIS_TIMEOUT = 60
LAWS = {0: "u-law", 8: "a-law"}  # RTP payload type -> sox encoding


class SpeechError(RuntimeError):
    pass


def missing_tools() -> list[str]:
    """The programs speech needs that this machine lacks."""
    return [tool for tool in (ENGINE, "sox") if shutil.which(tool) is None]


class Speech:
    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.memory: OrderedDict[str, dict[int, bytes]] = OrderedDict()
        self.marked: dict[str, float] = {}  # key -> when its use was last marked on disk
        self.hits = self.misses = 0

    def key(self, text: str, voice: str) -> str:
        return hashlib.sha256(f"{ENGINE}\0{voice}\0{text}".encode()).hexdigest()

    def render(self, text: str, voice: str) -> dict[int, bytes]:
        """G.711 audio of `text` spoken by `voice`: {0: u-law bytes, 8: a-law bytes}."""
        return self._cached(
            self.key(text, voice), lambda paths: self._synthesize(text, voice, paths)
        )

    def clip(self, url: str, fetch: Callable[[], bytes], *, max_seconds: float) -> dict[int, bytes]:
        """The WAV file at `url` as G.711 in both laws, as `render` gives speech: fetched by
        `fetch()` (whose exception, when it cannot, reaches the caller) the first time,
        converted by sox,
        and cached under its URL like speech (a new file needs a new URL). SpeechError for a
        file sox cannot read, or one longer than `max_seconds`."""
        key = hashlib.sha256(f"play\0{url}".encode()).hexdigest()
        return self._cached(key, lambda paths: self._convert(fetch(), paths, max_seconds))

    def _cached(self, key: str, make: Callable[[dict[int, Path]], None]) -> dict[int, bytes]:
        """The audio cached under `key`, from memory or the files; made by `make(paths)`
        (which writes each law's file) when neither holds it."""
        paths = {pt: self.cache_dir / f"{key}.{pt}" for pt in LAWS}
        if key in self.memory:
            self.memory.move_to_end(key)
            self.hits += 1
            self._mark_used(key, paths)
            return self.memory[key]
        try:
            self._mark_used(key, paths, now=True)  # before reading: cache_trim spares it
            audio = {pt: path.read_bytes() for pt, path in paths.items()}
            self.hits += 1
        except FileNotFoundError:  # never made, or trimmed away
            self.misses += 1
            make(paths)
            audio = {pt: path.read_bytes() for pt, path in paths.items()}
        self.memory[key] = audio
        if len(self.memory) > MEMORY_ENTRIES:
            evicted, _ = self.memory.popitem(last=False)
            self.marked.pop(evicted, None)
        return audio

    def _convert(self, wav: bytes, paths: dict[int, Path], max_seconds: float) -> None:
        """A WAV file to each law's file; SpeechError past `max_seconds` (sox stops reading a
        moment after it, so a file that claims hours is never decoded whole)."""
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as work:
            made = {}
            for pt, law in LAWS.items():
                audio = self._run(
                    sox(["-t", "wav", "-"], law, "-") + ["trim", "0", str(max_seconds + 1)],
                    stdin=wav,
                )
                if len(audio) > max_seconds * 8000:
                    raise SpeechError(f"longer than {max_seconds:g} s")
                made[pt] = Path(work) / f"clip.{pt}"
                made[pt].write_bytes(audio)
            for pt, path in made.items():
                os.replace(path, paths[pt])  # atomic: another agent never reads half a file

    def _mark_used(self, key: str, paths: dict[int, Path], *, now: bool = False) -> None:
        """Set the message's files' mtime to now: cache_trim keeps what was used last."""
        at = time.monotonic()
        if not now and at - self.marked.get(key, -USE_MARK_INTERVAL) < USE_MARK_INTERVAL:
            return
        self.marked[key] = at
        for path in paths.values():
            if now:
                os.utime(path)  # FileNotFoundError: the caller makes it
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.utime(path)

    def _synthesize(self, text: str, voice: str, paths: dict[int, Path]) -> None:
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as work:
            wav = Path(work) / "speech.wav"
            # The text goes in on stdin, never as an argument: a message starting with "-"
            # must not read as an option.
            self._run([ENGINE, "-v", voice, "--stdin", "-w", str(wav)], stdin=text)
            for pt, law in LAWS.items():
                raw = Path(work) / f"speech.{pt}"
                self._run(sox([str(wav)], law, str(raw)))
                os.replace(raw, paths[pt])  # atomic: another agent never reads half a file

    def tone(self) -> dict[int, bytes]:
        """The beep before voicemail records: 1 kHz for 0.4 s, in both laws."""
        if "tone" not in self.memory:
            self.memory["tone"] = {
                pt: self._run(
                    sox(["-n"], law, "-") + ["synth", "0.4", "sine", "1000", "vol", "0.5"]
                )
                for pt, law in LAWS.items()
            }
        return self.memory["tone"]

    def telephone_audio(self, wav: bytes, payload_type: int) -> bytes:
        """A WAV file (a voicemail message) as G.711 at 8 kHz mono, to play into a call."""
        return self._run(
            sox(["-t", "wav", "-"], LAWS[payload_type], "-"),
            stdin=wav,
        )

    def _run(self, argv: list[str], stdin: str | bytes | None = None) -> bytes:
        """What `argv` writes to stdout; SpeechError (logged without the text) if it fails."""
        if isinstance(stdin, str):
            stdin = stdin.encode()
        try:
            done = subprocess.run(  # noqa: S603 - fixed programs, the text on stdin
                argv,
                input=stdin or b"",
                capture_output=True,
                check=True,
                timeout=SYNTHESIS_TIMEOUT,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            logger.warning("speech synthesis failed: %s", type(exc).__name__)
            raise SpeechError(f"{argv[0]} failed") from exc
        return done.stdout


def sox(source: list[str], law: str, target: str) -> list[str]:
    """sox's command line from `source` (a file, or `-t wav -` for stdin, or `-n` for none) to
    raw G.711 `law` at 8 kHz mono in `target` (a file, or `-` for stdout). Repeatable (-R):
    sox seeds its dither, so one text is the same audio every time it is rendered."""
    return ["sox", "-R", *source, "-r", "8000", "-c", "1", "-e", law, "-t", "raw", target]


def _messages(cache_dir: Path) -> dict[str, tuple[int, float]]:
    """Each cached message: its files' size together, and when it was last used (the latest
    mtime of its files). Work directories of syntheses under way are not messages."""
    messages: dict[str, tuple[int, float]] = {}
    with contextlib.suppress(FileNotFoundError), os.scandir(cache_dir) as entries:
        for entry in entries:
            key, dot, law = entry.name.rpartition(".")
            if not dot or law not in ("0", "8") or not entry.is_file(follow_symlinks=False):
                continue
            try:
                stat = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            size, used = messages.get(key, (0, 0.0))
            messages[key] = (size + stat.st_size, max(used, stat.st_mtime))
    return messages


def cache_usage(cache_dir: Path) -> tuple[int, int]:
    """The speech cache's size in bytes, and how many messages it holds."""
    messages = _messages(cache_dir)
    return sum(size for size, _ in messages.values()), len(messages)


def cache_trim(cache_dir: Path, *, max_bytes: int, in_use_since: float) -> tuple[int, int]:
    """Remove the messages used longest ago until the cache holds at most `max_bytes`; never
    one used at or after `in_use_since` (a Unix time: a live call may be playing it). How
    many messages and bytes were removed."""
    messages = _messages(cache_dir)
    total = sum(size for size, _ in messages.values())
    removed = freed = 0
    for key, (size, used) in sorted(messages.items(), key=lambda item: item[1][1]):
        if total <= max_bytes or used >= in_use_since:
            break
        for law in LAWS:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(cache_dir / f"{key}.{law}")
        total -= size
        removed, freed = removed + 1, freed + size
    return removed, freed
