"""`manage.py runrelay` for real: the processes `make run` starts, serving HTTP and WebSocket,
and all of them gone after SIGTERM."""

import json
import signal
import subprocess
import sys

import psutil
import pytest
from websockets.sync.client import connect

from tests.live import ROOT, RelayProcess, child_environ, http, wait_until

DEADLINE = 60


def cmdline(process: psutil.Process) -> list[str]:
    """A child's command line; [] for one that has already exited."""
    try:
        return process.cmdline()
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return []


@pytest.fixture
def relay_server(tmp_path):
    env = child_environ(
        DATABASE_URL=f"sqlite:///{tmp_path / 'relay.sqlite3'}",
        SECRET_KEY="runrelay-test-secret-key-0123456789",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        RELAY_VAR_DIR=tmp_path,
    )
    env.pop("REDIS_URL", None)  # the embedded default: runrelay starts its own Redis
    subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    relay = RelayProcess(tmp_path, environ=env)
    yield relay.proc, relay.base, relay.ws_port
    relay.stop()  # SIGTERM: runrelay stops its children; a kill would orphan them


def test_runrelay_serves_the_api_and_websocket_and_stops_everything(relay_server):
    proc, base, ws_port = relay_server
    children = psutil.Process(proc.pid).children(recursive=True)
    names = " ".join(" ".join(cmdline(c)) for c in children)
    assert "redis-server" in names and "relay_worker" in names
    assert "gunicorn" in names and "relay.daphne_server" in names

    status, health = http("GET", f"{base}/healthz")
    assert health == {"status": "ok", "database": "ok", "channelLayer": "ok"}
    status, body = http(
        "POST",
        f"{base}/api/auth/register",
        {"email": "run@example.com", "password": "a-long-and-unusual-passphrase"},
    )
    assert status == 201
    status, dashboard = http("GET", f"{base}/api/dashboard", token=body["token"])
    assert status == 200
    # HTTP is gunicorn's port; the dashboard sends sockets to Daphne's.
    assert dashboard["wsUrl"] == f"ws://127.0.0.1:{ws_port}/ws?token={body['token']}"
    with connect(dashboard["wsUrl"], open_timeout=10) as ws:
        ws.send(json.dumps({"type": "ping"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "pong"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running: {alive}"


def test_runrelay_reaps_its_housekeeping_child(relay_server):
    """The purge it starts at once and every 10 minutes is waited for as soon as it exits,
    not left a zombie until the next cycle."""
    proc, _base, _ws_port = relay_server
    runrelay = psutil.Process(proc.pid)

    def purges() -> list[psutil.Process]:
        # A child on its way out has lost its command line before it is a zombie: it counts
        # until runrelay has reaped it (every other child of runrelay has a command line).
        return [
            child
            for child in runrelay.children()
            if not cmdline(child) or "purge_expired" in cmdline(child)
        ]

    # The first purge starts with runrelay, before it serves; once it has finished, nothing
    # of it is left (it used to stay a zombie for the whole 10-minute cycle).
    wait_until(lambda: not purges(), deadline=DEADLINE, what="the purge child to be reaped")
    zombies = [c for c in runrelay.children() if c.status() == psutil.STATUS_ZOMBIE]
    assert zombies == []
