"""Servers the harness starts and stops itself, and the CPU/RSS figures read from them."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
START_DEADLINE = 60.0
STOP_GRACE = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (children inherit it); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else 1 << 20
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def children_cpu_seconds() -> float:
    """User + system CPU of every child this process has reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Server:
    """One server process on a free port; `ready` is an HTTP path that must answer 200."""

    def __init__(self, name: str, argv: list[str], env: dict, *, port: int, ready: str = "/"):
        self.name = name
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.ws_base = f"ws://127.0.0.1:{port}"
        self.log_path = Path(env["RELAY_VAR_DIR"]) / f"{name}-{port}.log"
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.ps = psutil.Process(self.proc.pid)
        self._wait_ready(ready)

    def _wait_ready(self, path: str) -> None:
        end = time.monotonic() + START_DEADLINE
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited during start-up; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.base + path, timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not serve {path} in {START_DEADLINE:.0f}s")

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def rss(self) -> int:
        return self.ps.memory_info().rss

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def daphne(name: str, app: str, env: dict) -> Server:
    port = free_port()
    # -v 0: no access log (Daphne's would also print the WebSocket token in query strings).
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0", app]
    ready = "/healthz" if app.startswith("relay.") else "/"
    return Server(name, argv, env, port=port, ready=ready)


def uvicorn(name: str, app: str, env: dict) -> Server:
    port = free_port()
    argv = [
        sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
        "--no-access-log", "--log-level", "warning", "--lifespan", "off",
    ]  # fmt: skip
    return Server(name, argv, env, port=port)


class Worker:
    """`manage.py relay_worker`, for the scenarios whose calls must progress (W4)."""

    def __init__(self, env: dict):
        self.log_path = Path(env["RELAY_VAR_DIR"]) / "worker.log"
        self._log = self.log_path.open("ab")
        argv = [
            sys.executable, "manage.py", "relay_worker", "--queue-name", "default",
            "--no-reload", "--no-startup-delay", "--interval", env["WORKER_POLL_INTERVAL"],
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def machine() -> str:
    import platform

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = psutil.virtual_memory().total / 2**30
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )
