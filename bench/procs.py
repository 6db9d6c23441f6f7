"""Servers the harness starts and stops itself, and the CPU/RSS figures read from them.

Ports, child processes and their start-up wait come from tests/live.py, the one place the
suite and the harness share them.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import psutil

from tests.live import ChildProcess, free_port

STOP_GRACE = 15.0


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


class Server(ChildProcess):
    """One server process on a free port; `ready` is an HTTP path that must answer 200."""

    stop_grace = STOP_GRACE

    def __init__(self, name: str, argv: list[str], env: dict, *, port: int, ready: str = "/"):
        self.name = name
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.ws_base = f"ws://127.0.0.1:{port}"
        super().__init__(argv, env, log=Path(env["RELAY_VAR_DIR"]) / f"{name}-{port}.log")
        self.ps = psutil.Process(self.proc.pid)
        self.wait_serving(self.base + ready, what=f"{name} to serve {ready}")

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def rss(self) -> int:
        return self.ps.memory_info().rss


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


class Worker(ChildProcess):
    """`manage.py relay_worker`, for the scenarios whose calls must progress (W4)."""

    stop_grace = STOP_GRACE

    def __init__(self, env: dict):
        argv = [
            sys.executable, "manage.py", "relay_worker", "--queue-name", "default",
            "--no-reload", "--no-startup-delay", "--interval", env["WORKER_POLL_INTERVAL"],
        ]  # fmt: skip
        super().__init__(argv, env, log=Path(env["RELAY_VAR_DIR"]) / "worker.log")


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
