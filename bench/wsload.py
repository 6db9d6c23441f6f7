"""Runs bench/wsclient.py in several processes and merges what they measured."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.procs import children_cpu_seconds
from harness.live import ROOT


@dataclass
class WsRun:
    results: list[dict] = field(default_factory=list)
    wall: float = 0.0
    client_cpu: float = 0.0  # CPU seconds of all client processes per wall second of load

    def merged(self, key: str) -> list:
        out: list = []
        for r in self.results:
            out.extend(r.get(key, []))
        return out

    def total(self, key: str) -> int:
        return sum(r.get(key, 0) for r in self.results)

    def errors(self) -> dict:
        out: dict = {}
        for r in self.results:
            for code, n in r.get("errors", {}).items():
                out[code] = out.get(code, 0) + n
        return out


def _cpu(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


class ClientGroup:
    """N client processes sharing `urls`; each line of their protocol is read with a timeout."""

    def __init__(self, urls: list[str], processes: int, config: dict, deadline: float):
        processes = max(1, min(processes, len(urls)))
        self._files = []
        self.procs: list[subprocess.Popen] = []
        self.cpu_before = children_cpu_seconds()
        for n in range(processes):
            part = urls[n::processes]
            cfg = {**config, "urls": part, "deadline": deadline}
            f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)  # noqa: SIM115
            json.dump(cfg, f)
            f.close()
            self._files.append(Path(f.name))
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bench.wsclient", f.name],
                    cwd=ROOT,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        self.deadline = deadline

    def _read(self, proc: subprocess.Popen, tag: str, timeout: float) -> dict:
        box: list = []

        def reader():
            for line in proc.stdout:
                if line.startswith(tag + " "):
                    box.append(json.loads(line[len(tag) + 1 :]))
                    return

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(timeout)
        if not box:
            raise RuntimeError(f"a WebSocket client sent no {tag} within {timeout:.0f}s")
        return box[0]

    def ready(self, timeout: float) -> int:
        """Wait until every process has opened its sockets; the number connected."""
        return sum(self._read(p, "READY", timeout)["connected"] for p in self.procs)

    def send(self, command: str) -> None:
        for p in self.procs:
            p.stdin.write(command + "\n")
            p.stdin.flush()

    def start(self, overrides: dict | None = None) -> None:
        """Start one measured run in every process; `rate` is split between them."""
        overrides = dict(overrides or {})
        # CPU spent connecting is not load: count only what the processes burn from here on.
        self._cpu_at_start = sum(_cpu(p.pid) for p in self.procs)
        self._started = time.monotonic()
        for n, p in enumerate(self.procs):
            mine = dict(overrides)
            if "rate" in mine:
                mine["rate"] = overrides["rate"] / len(self.procs)
            if "prefix" in mine:
                mine["prefix"] = f"{overrides['prefix']}-p{n}"
            p.stdin.write("RUN " + json.dumps(mine) + "\n")
            p.stdin.flush()

    def collect(self, timeout: float) -> WsRun:
        run = WsRun()
        run.results = [self._read(p, "RESULT", timeout) for p in self.procs]
        run.wall = time.monotonic() - self._started
        cpu = sum(_cpu(p.pid) for p in self.procs) - self._cpu_at_start
        run.client_cpu = max(0.0, cpu) / max(run.wall, 1e-6)
        return run

    def run(self, overrides: dict, timeout: float) -> WsRun:
        self.start(overrides)
        return self.collect(timeout)

    def close(self) -> None:
        """STOP every process (they close their sockets) and reap it."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.stdin.write("STOP\n")
                    p.stdin.close()
                except BrokenPipeError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self._files:
            f.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def cpu_seconds(self) -> float:
        """CPU of the processes since they started (valid once close() has reaped them)."""
        return children_cpu_seconds() - self.cpu_before
