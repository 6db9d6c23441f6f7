"""The message as audio: synthesized offline by espeak-ng, converted by sox to 8 kHz mono
G.711 (both laws, so either codec the callee picks is ready), cached by (engine, voice, text).

The cache is files under TTS_CACHE_DIR, written atomically, so every agent process shares it
and a restart keeps it; a small in-memory layer saves re-reading hot messages.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections import OrderedDict
from pathlib import Path

logger = logging.getLogger(__name__)

ENGINE = "espeak-ng"
MEMORY_ENTRIES = 64
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
        self.hits = self.misses = 0

    def key(self, text: str, voice: str) -> str:
        return hashlib.sha256(f"{ENGINE}\0{voice}\0{text}".encode()).hexdigest()

    def render(self, text: str, voice: str) -> dict[int, bytes]:
        """G.711 audio of `text` spoken by `voice`: {0: u-law bytes, 8: a-law bytes}."""
        key = self.key(text, voice)
        if key in self.memory:
            self.memory.move_to_end(key)
            self.hits += 1
            return self.memory[key]
        paths = {pt: self.cache_dir / f"{key}.{pt}" for pt in LAWS}
        if all(path.exists() for path in paths.values()):
            self.hits += 1
        else:
            self.misses += 1
            self._synthesize(text, voice, paths)
        audio = {pt: path.read_bytes() for pt, path in paths.items()}
        self.memory[key] = audio
        if len(self.memory) > MEMORY_ENTRIES:
            self.memory.popitem(last=False)
        return audio

    def _synthesize(self, text: str, voice: str, paths: dict[int, Path]) -> None:
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as work:
            wav = Path(work) / "speech.wav"
            # The text goes in on stdin, never as an argument: a message starting with "-"
            # must not read as an option.
            self._run([ENGINE, "-v", voice, "--stdin", "-w", str(wav)], stdin=text)
            for pt, law in LAWS.items():
                raw = Path(work) / f"speech.{pt}"
                self._run(
                    ["sox", str(wav), "-r", "8000", "-c", "1", "-e", law, "-t", "raw", str(raw)]
                )
                os.replace(raw, paths[pt])  # atomic: another agent never reads half a file

    def tone(self) -> dict[int, bytes]:
        """The beep before voicemail records: 1 kHz for 0.4 s, in both laws."""
        if "tone" not in self.memory:
            self.memory["tone"] = {
                pt: self._run(
                    ["sox", "-n", "-r", "8000", "-c", "1", "-e", law, "-t", "raw", "-"]
                    + ["synth", "0.4", "sine", "1000", "vol", "0.5"]
                )
                for pt, law in LAWS.items()
            }
        return self.memory["tone"]

    def telephone_audio(self, wav: bytes, payload_type: int) -> bytes:
        """A WAV file (a voicemail message) as G.711 at 8 kHz mono, to play into a call."""
        return self._run(
            ["sox", "-t", "wav", "-", "-r", "8000", "-c", "1"]
            + ["-e", LAWS[payload_type], "-t", "raw", "-"],
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
