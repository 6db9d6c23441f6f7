"""Live processes for the tests and the bench: child environments, child processes (Relay's
servers, its worker and its telephony agent among them), HTTP to them, and waiting with a
deadline. The ports they are handed come from harness/ports.py.

bench/ imports this module outside pytest and before Django is set up: nothing here reads
settings at import time. Only what points a child at the test database (`test_database_url`,
`relay_env`, and the processes started with it) reads them, when called.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
from django.conf import settings
from django.db import connection

from harness.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
START_DEADLINE = 60
# How long an in-process WebSocket handshake (Channels' WebsocketCommunicator) may take: its
# own default, 1 s, is less than a busy machine running the suite's workers side by side can
# take to authenticate a socket. A deadline, not a wait: a handshake that is answered returns.
HANDSHAKE_DEADLINE = 30


def cmdline(process: psutil.Process) -> list[str]:
    """A child's command line; [] for one that has already exited."""
    try:
        return process.cmdline()
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return []


def tool(name: str) -> str:
    """The full path of a command the harness starts (ruff's S607: never a bare name)."""
    path = shutil.which(name)
    assert path, f"{name} is not installed"
    return path


def test_database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return (
        f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


def child_environ(**extra) -> dict:
    """This process's environment for a child, which runs Relay's own settings, not the
    suite's (tests/settings.py), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(*argv: str, env: dict) -> subprocess.CompletedProcess:
    """This interpreter with `argv` (a script and its arguments, or `-c` and code), run to its
    end from the checkout, in environment `env`, its output captured."""
    return subprocess.run(  # noqa: S603 - our own interpreter, our own code
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def manage(*argv: str, env: dict) -> subprocess.CompletedProcess:
    """`manage.py argv...` run to its end from the checkout, in environment `env`."""
    return run_python("manage.py", *argv, env=env)


def assert_refused_at_start_up(result: subprocess.CompletedProcess, name: str) -> None:
    """`result` is manage.py stopping at start-up with one line, naming the setting `name`."""
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Relay cannot start: ")
    assert name in lines[0]


def assert_private(var_dir: Path) -> None:
    """`var_dir` is 0700, and nothing under it (files, folders, the Redis socket) grants its
    group or others anything."""
    assert stat.S_IMODE(var_dir.stat().st_mode) == 0o700
    opened = {
        str(path.relative_to(var_dir)): oct(stat.S_IMODE(path.lstat().st_mode))
        for path in var_dir.rglob("*")
        if not path.is_symlink() and path.lstat().st_mode & 0o077
    }
    assert opened == {}


WORKER_POLL_INTERVAL = "0.2"  # seconds, the product's default; relay_env says why


def relay_env(var_dir: Path, **extra) -> dict:
    """The environment of a child process: the test's database, secret and Redis (if any)."""
    env = child_environ()
    env.update(
        DATABASE_URL=test_database_url(),
        SECRET_KEY=settings.SECRET_KEY,
        RELAY_VAR_DIR=str(var_dir),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        RATE_LIMIT_CALLS_PER_USER="100000/m",
        SIMULATED_STEP_SECONDS="0.02",
        SIMULATED_TALK_SCALE="0",
        # An idle worker polls the database every interval: at 0.02 s an idle Relay cost 14%
        # of a core (6% at 0.05, measured with runrelay's two workers), and the suite runs
        # four at once on two cores; on PostgreSQL an idle worker polling every 0.05 s took
        # about 4% of a core (issue 55), at 0.2 (the default) about 1.3%. Once a task is
        # found the worker takes the next at once.
        WORKER_POLL_INTERVAL=WORKER_POLL_INTERVAL,
        # One gunicorn worker, with its threads: a process less to import Django at each start
        # of a test's server, so the suite's CPU goes to tests. Tests of several set it.
        HTTP_WORKERS="1",
        # Tests that register users in parallel wait for their hashes instead of racing for
        # the host's one slot (the cap's own tests set it).
        PASSWORD_HASH_CONCURRENCY="100",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _attempts(deadline: float, what: str):
    """Yield until `deadline` seconds have passed, then fail naming `what`."""
    end = time.monotonic() + deadline
    while True:
        yield
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")


def wait_until(predicate, *, deadline: float, what: str, interval: float = 0.05):
    """Poll `predicate` until it returns something true (returned), or fail at `deadline`."""
    for _ in _attempts(deadline, what):
        if result := predicate():
            return result
        time.sleep(interval)


async def eventually(predicate, *, deadline: float, what: str, interval: float = 0.05):
    """wait_until for state that tasks on the running event loop update."""
    for _ in _attempts(deadline, what):
        if result := predicate():
            return result
        await asyncio.sleep(interval)


def http_exchange(
    method: str,
    url: str,
    body: dict | None = None,
    token: str | None = None,
    *,
    timeout=15,
    headers: dict | None = None,
) -> tuple[int, Any, dict]:
    """One JSON request to a live server (Bearer `token` if given, and `headers`): its status,
    JSON body (None for an empty one, a 204's) and headers, error statuses included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - our server
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, _json_or_none(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, _json_or_none(error.read()), dict(error.headers)


def _json_or_none(body: bytes) -> Any:
    return json.loads(body) if body else None


def http(method: str, url: str, *args, **kwargs) -> tuple[int, Any]:
    """`http_exchange` (the same arguments) without the headers: (status, JSON body)."""
    status, payload, _ = http_exchange(method, url, *args, **kwargs)
    return status, payload


class ChildProcess:
    """A child run from the repository root with `env`, its output appended to `log` if given
    (else inherited). stop() sends SIGTERM, waits `stop_grace` seconds, then kills; with
    `own_group` the child leads a process group of its own and the signals go to the group."""

    stop_grace: float = 30

    def __init__(self, argv: list[str], env: dict, *, log: Path | None = None, own_group=False):
        self.log_path = log
        self._log = log.open("ab") if log is not None else None
        self.own_group = own_group
        self.proc = subprocess.Popen(  # noqa: S603 - our own commands
            argv,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log else None,
            start_new_session=own_group,
        )

    def wait_started(self, ready, *, what: str, deadline: float, interval: float = 0.05):
        """Poll `ready` until it returns something true (returned); fail at once if the child
        exits first. A child that fails to start is stopped, so nothing outlives a failed
        start."""

        def started():
            if self.proc.poll() is not None:
                raise AssertionError(f"{what}: exited during start-up{self._log_tail()}")
            return ready()

        try:
            return wait_until(started, deadline=deadline, what=what, interval=interval)
        except BaseException:
            self.stop()
            raise

    def wait_serving(self, url: str, *, what: str, deadline: float = START_DEADLINE) -> None:
        """Poll `url` until it answers 200, as wait_started."""

        def serving() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                    return response.status == 200
            except OSError:
                return False

        self.wait_started(serving, what=what, deadline=deadline, interval=0.1)

    def _log_tail(self) -> str:
        if self.log_path is None:
            return ""
        return f"; the end of {self.log_path}:\n{self.log_path.read_text()[-4000:]}"

    def _signal(self, signum: int) -> None:
        if not self.own_group:
            self.proc.send_signal(signum)
            return
        with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
            os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None or self.own_group:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log is not None:
            self._log.close()


class RelayProcess(ChildProcess):
    """`manage.py runrelay` on a free port, serving once /healthz answers 200. Its environment
    is `relay_env(var_dir, **env)` (the test database), or `environ` when given."""

    def __init__(
        self,
        var_dir: Path,
        *args: str,
        environ: dict | None = None,
        log: Path | None = None,
        **env,
    ):
        self.port, self.ws_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.ws_base = f"ws://127.0.0.1:{self.ws_port}"
        argv = [sys.executable, "manage.py", "runrelay", "--port", str(self.port)]
        argv += ["--ws-port", str(self.ws_port), *args]
        environ = environ if environ is not None else relay_env(var_dir, **env)
        # The servers need PUBLIC_URL outside DEBUG (relay.serving); mailed links lead here.
        environ = {"PUBLIC_URL": self.base, **environ}
        super().__init__(argv, environ, log=log)
        # gunicorn answers HTTP, Daphne the socket (and HTTP too, on its own port).
        self.wait_serving(f"{self.base}/healthz", what="runrelay's gunicorn to serve")
        self.wait_serving(f"http://127.0.0.1:{self.ws_port}/healthz", what="runrelay's Daphne")


class DaphneProcess(ChildProcess):
    """Relay's Daphne alone (as runrelay runs it, without the other processes), serving the
    socket on a free port, for a test that runs the worker and an agent apart to kill one (or
    the bench, with `environ`: its own settings rather than the test database's)."""

    def __init__(
        self, var_dir: Path, *, log: Path | None = None, environ: dict | None = None, **env
    ):
        self.port = free_port()
        self.ws_base = f"ws://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "relay.platform.daphne_server", "-b", "127.0.0.1"]
        argv += ["-p", str(self.port), "-v", "0", "relay.asgi:application"]
        environ = environ if environ is not None else relay_env(var_dir, **env)
        environ = {"PUBLIC_URL": f"http://127.0.0.1:{self.port}", **environ}
        super().__init__(argv, environ, log=log)
        self.wait_serving(f"http://127.0.0.1:{self.port}/healthz", what="Daphne")


class WorkerProcess(ChildProcess):
    """`manage.py relay_worker` alone, so a test can kill and restart it."""

    def __init__(self, var_dir: Path, **env):
        argv = [
            sys.executable,
            "manage.py",
            "relay_worker",
            "--no-reload",
            "--no-startup-delay",
            "--interval",
            WORKER_POLL_INTERVAL,
        ]
        super().__init__(argv, relay_env(var_dir, **env))


class AgentProcess(ChildProcess):
    """`manage.py telephony_agent` alone (no runrelay), so that a test can kill it; its log is
    `workdir/<name>.log`."""

    stop_grace = 10

    def __init__(self, workdir: Path, env: dict, *, index: int = 0, name: str = "agent"):
        argv = [sys.executable, "manage.py", "telephony_agent", "--index", str(index)]
        super().__init__(argv, relay_env(workdir, **env), log=workdir / f"{name}.log")
