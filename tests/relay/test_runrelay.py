"""`manage.py runrelay` for real: the processes `make run` starts, serving HTTP and WebSocket,
and all of them gone after SIGTERM."""

import json
import re
import signal
import subprocess
import sys
import urllib.request

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from harness.live import (
    ROOT,
    WORKER_POLL_INTERVAL,
    RelayProcess,
    assert_private,
    child_environ,
    cmdline,
    http,
    wait_until,
)

# A whole runrelay (its children each importing Django) starts for each test, after a migrate:
# on a loaded 2-core machine that takes over the default 120 s now and then.
pytestmark = pytest.mark.timeout(300)

DEADLINE = 60
METRICS_TOKEN = "runrelay-metrics-token-0123456789"


@pytest.fixture
def relay_server(tmp_path):
    env = child_environ(
        DATABASE_URL=f"sqlite:///{tmp_path / 'relay.sqlite3'}",
        SECRET_KEY="runrelay-test-secret-key-0123456789",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        RELAY_VAR_DIR=tmp_path,
        METRICS_TOKEN=METRICS_TOKEN,
        SIMULATED_STEP_SECONDS="0.02",
        SIMULATED_TALK_SCALE="0",
        WORKER_POLL_INTERVAL=WORKER_POLL_INTERVAL,
        HOUSEKEEPING_DELAY_SECONDS="0",  # its first purge at once: the reaping test sees it
    )
    env.pop("REDIS_URL", None)  # the embedded default: runrelay starts its own Redis
    subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    env.pop("EMAIL_URL", None)  # the embedded default: mail printed to runrelay's output
    # What an older release (or a hand-run migrate under umask 022) left: a world-readable
    # database in a world-listable var/. runrelay narrows both as it starts (issue 53).
    tmp_path.chmod(0o755)
    (tmp_path / "relay.sqlite3").chmod(0o644)
    relay = RelayProcess(tmp_path, environ=env, log=tmp_path / "runrelay.log")
    yield relay.proc, relay.base, relay.ws_port
    relay.stop()  # SIGTERM: runrelay stops its children; a kill would orphan them


def test_runrelay_serves_the_api_and_websocket_and_stops_everything(relay_server, tmp_path):
    proc, base, ws_port = relay_server
    children = psutil.Process(proc.pid).children(recursive=True)
    names = " ".join(" ".join(cmdline(c)) for c in children)
    assert "redis-server" in names and "relay_worker" in names
    assert "gunicorn" in names and "relay.platform.daphne_server" in names

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

    # Mail on the embedded default: the worker prints it, link and all, to runrelay's output.
    status, _ = http("POST", f"{base}/api/auth/password-reset", {"email": "run@example.com"})
    assert status == 202
    printed = tmp_path / "runrelay.log"
    link = re.compile(r"http://127\.0\.0\.1:\d+/password-reset/[0-9a-f]{32}\.[0-9a-z]+-[0-9a-f]+")
    wait_until(
        lambda: link.search(printed.read_text(errors="replace")),
        deadline=DEADLINE,
        what="the reset mail in runrelay's output",
    )
    assert "Subject: Reset your Relay password" in printed.read_text(errors="replace")

    # var/ (here RELAY_VAR_DIR) is runrelay's user's alone: the database and its WAL files,
    # and everything runrelay and its children wrote there (issue 53).
    assert_private(tmp_path)
    assert {"relay.sqlite3", "relay.sqlite3-wal", "relay.sqlite3-shm"} <= {
        path.name for path in tmp_path.iterdir()
    }

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running: {alive}"


def test_runrelay_reaps_its_housekeeping_child(relay_server):
    """The purge it starts HOUSEKEEPING_DELAY_SECONDS after its start (0 here) and every 10
    minutes is waited for as soon as it exits, not left a zombie until the next cycle."""
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

    # The first purge starts with runrelay here, before it serves; once it has finished,
    # nothing of it is left (it used to stay a zombie for the whole 10-minute cycle).
    wait_until(lambda: not purges(), deadline=DEADLINE, what="the purge child to be reaped")
    zombies = [c for c in runrelay.children() if c.status() == psutil.STATUS_ZOMBIE]
    assert zombies == []


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    """/metrics of a live Relay, as {(name, sorted labels): value}."""
    request = urllib.request.Request(f"{base}/metrics")  # noqa: S310 - our server
    request.add_header("Authorization", f"Bearer {METRICS_TOKEN}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.status == 200
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_metrics_sum_every_process_of_runrelay(relay_server):
    """After a call over the socket and one over HTTP, /metrics shows every series, summed
    over gunicorn's workers, Daphne and the worker (PROMETHEUS_MULTIPROC_DIR)."""
    _proc, base, ws_port = relay_server
    status, body = http(
        "POST",
        f"{base}/api/auth/register",
        {"email": "metrics@example.com", "password": "a-long-and-unusual-passphrase"},
    )
    assert status == 201
    token = body["token"]
    ws_url = f"ws://127.0.0.1:{ws_port}/ws"
    with connect(f"{ws_url}?token=not-a-jwt", open_timeout=10) as refused:
        with pytest.raises(ConnectionClosed) as closed:
            refused.recv(timeout=10)
        assert closed.value.rcvd.code == 4401
    with connect(f"{ws_url}?token={token}", open_timeout=10) as ws:
        call = {"type": "call", "callId": "m-1", "to": "+442079460123", "message": "Hi"}
        ws.send(json.dumps(call))
        final = None
        while final is None:
            frame = json.loads(ws.recv(timeout=DEADLINE))
            if frame["type"] == "call_status" and frame["status"] == "completed":
                final = frame
        status, ack = http(
            "POST",
            f"{base}/api/calls",
            {"callId": "m-2", "to": "+442079460124", "message": "Hi"},
            token=token,
        )
        assert (status, ack["status"]) == (202, "queued")
        open_now = scrape(base)
    assert value(open_now, "relay_websocket_connections") == 1

    def settled():
        samples = scrape(base)
        ended = value(samples, "relay_calls_ended_total", status="completed") or 0
        closed = value(samples, "relay_websocket_connections") == 0
        return samples if ended == 2 and closed else None

    samples = wait_until(settled, deadline=DEADLINE, what="both calls ended, the socket closed")
    register = {"route": "auth-register", "method": "POST"}
    assert value(samples, "relay_http_requests_total", status="201", **register) == 1
    assert value(samples, "relay_http_request_duration_seconds_count", **register) == 1
    assert value(samples, "relay_http_request_duration_seconds_bucket", le="+Inf", **register) == 1
    assert value(samples, "relay_websocket_refused_total", reason="bad_jwt") == 1
    assert value(samples, "relay_call_acks_total", via="socket") == 1
    assert value(samples, "relay_call_acks_total", via="http") == 1
    assert value(samples, "relay_outbox_pending", outbox="webhooks") == 0
    assert value(samples, "relay_outbox_oldest_pending_age_seconds", outbox="webhooks") == 0
    assert value(samples, "relay_worker_lag_seconds") is not None
    assert value(samples, "relay_tasks_due") is not None
