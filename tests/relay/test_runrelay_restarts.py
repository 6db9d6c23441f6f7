"""`manage.py runrelay` keeps Relay up (issue 55): a child that dies is started again, with
backoff, the rest running on; only a child that fails to start MAX_FAILED_STARTS times in a
row stops Relay. Real processes, as `make run` starts them: SQLite in a temp dir, free ports,
two telephony agents and the Matrix bot (its homeserver unreachable: it waits, it runs)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import urllib.request

import psutil
import pytest

from harness.live import (
    ROOT,
    WORKER_POLL_INTERVAL,
    ChildProcess,
    RelayProcess,
    child_environ,
    cmdline,
    wait_until,
)
from harness.ports import free_port, free_rtp_range
from relay.management.commands.runrelay import (
    MAX_FAILED_STARTS,
    RESTART_FIRST_DELAY,
    RESTART_LONGEST_DELAY,
    STABLE_SECONDS,
    STARTUP_SECONDS,
    Child,
)

# A whole runrelay (seven children, each importing Django) starts more than once per test, and a
# migrate precedes the first: on a loaded 2-core machine that is minutes, not the default 120 s.
pytestmark = pytest.mark.timeout(300)

DEADLINE = 60

# Each kind of child runrelay runs, and how its command line names it.
KINDS = {
    "redis": lambda argv: any("redis-server" in part for part in argv),  # its title: .. *:0
    "gunicorn": lambda argv: "gunicorn" in argv,
    "daphne 0": lambda argv: "relay.platform.daphne_server" in argv,
    "worker": lambda argv: "relay_worker" in argv,
    "telephony agent 0": lambda argv: "telephony_agent" in argv and argv[-1] == "0",
    "telephony agent 1": lambda argv: "telephony_agent" in argv and argv[-1] == "1",
    "matrix bot": lambda argv: "matrix_bot" in argv,
}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """An SQLite database migrated once, copied by each test (a migrate takes seconds)."""
    database = tmp_path_factory.mktemp("runrelay-db") / "relay.sqlite3"
    env = child_environ(
        DATABASE_URL=f"sqlite:///{database}",
        SECRET_KEY="runrelay-test-secret-key-0123456789",
        RELAY_VAR_DIR=database.parent,
    )
    subprocess.run(  # noqa: S603 - our own command
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=DEADLINE,
    )
    return database


def relay_environ(var_dir, migrated, *, sip_bind: int) -> dict:
    """runrelay's environment: its own copy of the database in `var_dir`, the embedded
    Redis, two agents on `sip_bind` and the next port (their trunk answers nothing), and
    Matrix on, its homeserver a port where nothing listens."""
    database = var_dir / "relay.sqlite3"
    shutil.copy(migrated, database)
    rtp = free_rtp_range(40)
    env = child_environ(
        DATABASE_URL=f"sqlite:///{database}",
        SECRET_KEY="runrelay-test-secret-key-0123456789",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        RELAY_VAR_DIR=var_dir,
        HTTP_WORKERS=1,
        WORKER_POLL_INTERVAL=WORKER_POLL_INTERVAL,
        TELEPHONY_PROVIDER="sip",
        SIP_TRUNK_URI=f"sip:127.0.0.1:{free_port()}",
        SIP_BIND=f"127.0.0.1:{sip_bind}",
        SIP_AGENTS=2,
        SIP_MAX_CONCURRENT_CALLS=10,
        RTP_PORT_RANGE=f"{rtp.start}-{rtp.stop - 1}",
        RTC_PORT_RANGE=f"{rtp.start + 20}-{rtp.stop - 1}",
        TTS_CACHE_DIR=var_dir / "tts",
        MATRIX_HOMESERVER_URL=f"http://127.0.0.1:{free_port()}",
        MATRIX_BOT_ACCESS_TOKEN="syt_not_a_real_token",
        MATRIX_BOT_USER_ID="@relay:localhost",
    )
    for name in ("REDIS_URL", "EMAIL_URL"):  # the embedded defaults, as `make run` has them
        env.pop(name, None)
    return env


def the_child(runrelay: psutil.Process, kind: str) -> psutil.Process | None:
    """runrelay's running child of `kind` (a killed one, not yet reaped, has no command line)."""
    matches = [child for child in runrelay.children() if KINDS[kind](cmdline(child))]
    assert len(matches) <= 1, matches
    return matches[0] if matches else None


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our server
            return response.status == 200
    except OSError:
        return False


def killed_and_back(relay: RelayProcess, kind: str, var_dir) -> list[psutil.Process]:
    """SIGKILL runrelay's child of `kind`; return once another has taken its place (an agent:
    past its start, its pid file its own) and both servers answer /healthz 200. Returned:
    every process of runrelay's before the kill (a gunicorn's workers among them)."""
    runrelay = psutil.Process(relay.proc.pid)
    old = wait_until(lambda: the_child(runrelay, kind), deadline=DEADLINE, what=kind)
    before = runrelay.children(recursive=True)

    old.send_signal(signal.SIGKILL)

    def started_again() -> psutil.Process | None:
        child = the_child(runrelay, kind)
        return child if child is not None and child.pid != old.pid else None

    new = wait_until(started_again, deadline=DEADLINE, what=f"{kind} started again")
    if kind == "gunicorn":  # its own worker serves, not one the killed master left behind
        wait_until(new.children, deadline=DEADLINE, what="the new gunicorn's worker")
    if kind.startswith("telephony agent"):
        pid_file = var_dir / f"telephony-agent-{kind[-1]}.pid"
        wait_until(
            lambda: pid_file.exists() and pid_file.read_text().strip() == str(new.pid),
            deadline=DEADLINE,
            what=f"{kind}'s pid file",
        )
    for url in (f"{relay.base}/healthz", f"http://127.0.0.1:{relay.ws_port}/healthz"):
        wait_until(lambda url=url: healthy(url), deadline=DEADLINE, what=url)
    return before


def test_runrelay_starts_each_child_killed_again_and_relay_serves_on(tmp_path, migrated):
    env = relay_environ(tmp_path, migrated, sip_bind=free_port(2))
    relay = RelayProcess(tmp_path, environ=env, log=tmp_path / "runrelay.log")
    seen: list[psutil.Process] = []
    try:
        for kind in KINDS:  # one after another, each back before the next is killed
            seen += killed_and_back(relay, kind, tmp_path)
            assert relay.proc.poll() is None, f"runrelay stopped when {kind} was killed"
        seen += psutil.Process(relay.proc.pid).children(recursive=True)

        log = (tmp_path / "runrelay.log").read_text(errors="replace")
        for kind in KINDS:
            assert f"{kind} exited with status -9; starting it again in 0.5 s" in log
            assert f"{kind} started again (pid " in log
        assert "stopping Relay" not in log
    finally:
        relay.stop()
    assert relay.proc.returncode == 0
    # Nothing outlives it: not the killed gunicorn's workers, nor any child started again.
    gone, alive = psutil.wait_procs(seen, timeout=10)
    assert not alive, f"left running: {alive}"


def test_runrelay_stops_when_a_child_fails_to_start_too_many_times_in_a_row(tmp_path, migrated):
    """The agent's SIP port is taken: it exits at each start, is tried MAX_FAILED_STARTS
    times, and then runrelay stops everything and exits non-zero, saying why. (Its servers,
    Redis and one agent alone: fewer processes start sooner.)"""
    sip_bind = free_port()
    env = relay_environ(tmp_path, migrated, sip_bind=sip_bind)
    env["SIP_AGENTS"] = "1"
    for name in ("MATRIX_HOMESERVER_URL", "MATRIX_BOT_ACCESS_TOKEN", "MATRIX_BOT_USER_ID"):
        del env[name]
    port, ws_port = free_port(), free_port()
    env["PUBLIC_URL"] = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "manage.py", "runrelay", "--port", str(port)]
    argv += ["--ws-port", str(ws_port), "--no-worker"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", sip_bind))
        relay = ChildProcess(argv, env, log=tmp_path / "runrelay.log")
        try:
            runrelay = psutil.Process(relay.proc.pid)
            children = wait_until(  # all started: the agent is the last
                lambda: len(runrelay.children()) >= 4 and runrelay.children(recursive=True),
                deadline=DEADLINE,
                what="runrelay's children",
            )
            # Its delays before the restarts (0.5 + 1 + 2 + 4 s) and five starts of Django, each
            # of which runrelay itself allows up to STARTUP_SECONDS on a busy machine.
            delays = sum(RESTART_FIRST_DELAY * 2**n for n in range(MAX_FAILED_STARTS - 1))
            code = relay.proc.wait(timeout=MAX_FAILED_STARTS * STARTUP_SECONDS + delays + DEADLINE)
        finally:
            relay.stop()

    assert code != 0
    log = (tmp_path / "runrelay.log").read_text(errors="replace")
    restarts = log.count("telephony agent 0 exited with status 1; starting it again in ")
    # Its first start, beside every other child's, may take longer than STARTUP_SECONDS on a
    # busy machine: then it counts as a start, and the row begins with the next one.
    assert MAX_FAILED_STARTS - 1 <= restarts <= MAX_FAILED_STARTS
    assert (
        f"telephony agent 0 exited with status 1, failing to start {MAX_FAILED_STARTS} times "
        "in a row; stopping Relay"
    ) in log
    assert "could not start" in log  # the agent's own line says what kept it from starting
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running: {alive}"


def deaths(child: Child, *uptimes: float) -> list[float]:
    """The delays `child` is restarted after, dying after each of `uptimes` seconds up."""
    delays, now = [], 0.0
    for up in uptimes:
        child.started_at = now
        now += up
        delays.append(child.died(now))
        now += delays[-1]
    return delays


def test_restart_delays_double_up_to_the_longest_and_start_again_once_stable():
    child = Child("worker", ["true"], {})
    crashing = [STARTUP_SECONDS + 1] * 8  # it starts, and dies a little later, again and again

    assert deaths(child, *crashing) == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert child.failed_starts == 0  # each time it had started
    assert (RESTART_FIRST_DELAY, RESTART_LONGEST_DELAY) == (0.5, 30)
    assert deaths(child, STABLE_SECONDS) == [RESTART_FIRST_DELAY]


def test_a_death_soon_after_the_start_is_a_failed_start_and_they_count_in_a_row():
    child = Child("worker", ["true"], {})

    deaths(child, 1, 1, STARTUP_SECONDS + 1, 1)

    assert child.failed_starts == 1  # the one that stayed up broke the row
    deaths(child, *[1] * (MAX_FAILED_STARTS - 1))
    assert child.failed_starts == MAX_FAILED_STARTS
