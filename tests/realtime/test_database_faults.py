"""PostgreSQL restarted under a live server: 503 JSON while it is down, success after."""

import asyncio
import json
import os
import subprocess
import sys
from functools import partial
from uuid import UUID

import pytest
from django.db import connection
from websockets.asyncio.client import connect

from harness.live import ROOT, RelayProcess, http_exchange, relay_env
from harness.private import PrivatePostgres

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="runs on the PostgreSQL pass, against a private cluster",
    ),
    pytest.mark.timeout(300),
]


# Every exchange with headers; a request may wait out the server's attempt to reach the
# stopped database.
http = partial(http_exchange, timeout=20)


@pytest.fixture
def postgres():
    """A private PostgreSQL cluster, removed after the test. Without the tools to run one
    (runuser, initdb) it skips on a developer's machine and fails in CI, like every tool."""
    if reason := PrivatePostgres.missing():
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    cluster = PrivatePostgres()
    yield cluster
    cluster.remove()


@pytest.fixture
def relay(postgres, tmp_path):
    """Relay on the private cluster, migrated."""
    env = {"DATABASE_URL": postgres.url}
    subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        env=relay_env(tmp_path / "relay", **env),
        check=True,
    )
    process = RelayProcess(tmp_path / "relay", **env)
    yield process
    process.stop()


def register(relay) -> str:
    status, body, _ = http(
        "POST",
        f"{relay.base}/api/auth/register",
        {"email": "pg@example.com", "password": "a-long-passphrase-pg"},
    )
    assert status == 201
    return body["token"]


def test_requests_answer_503_json_while_postgres_is_down_and_succeed_after(postgres, relay):
    token = register(relay)
    postgres.stop()

    for method, path, payload in [
        ("GET", "/api/user/me", None),
        ("GET", "/api/history", None),
        (
            "POST",
            "/api/auth/login",
            {"email": "pg@example.com", "password": "a-long-passphrase-pg"},
        ),
    ]:
        status, body, headers = http(method, f"{relay.base}{path}", payload, token)
        assert status == 503, (path, status, body)
        assert body["code"] == "database_unavailable"
        assert headers.get("Retry-After") == "5"
    status, health, _ = http("GET", f"{relay.base}/healthz")
    assert (status, health["database"]) == (503, "unavailable")

    postgres.start()

    status, me, _ = http("GET", f"{relay.base}/api/user/me", token=token)
    assert (status, me["email"]) == (200, "pg@example.com")


async def test_a_call_frame_while_postgres_is_down_gets_an_error_frame_and_the_socket_stays(
    postgres, relay
):
    """The batch the frame was in wrote nothing: the client is told so, and may send the same
    callId again once the database is back."""
    token = await asyncio.to_thread(register, relay)
    call = {"type": "call", "callId": "while-down", "to": "+442079460120", "message": "hi"}
    async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
        await asyncio.to_thread(postgres.stop)
        await ws.send(json.dumps(call))
        refused = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert refused == {
            "type": "error",
            "code": "database_unavailable",
            "error": "The database is unavailable. Try again shortly.",
            "callId": "while-down",
            "retryAfter": 5,
        }
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "pong"

        await asyncio.to_thread(postgres.start)
        await ws.send(json.dumps(call))
        acked = json.loads(await asyncio.wait_for(ws.recv(), 30))
        # The live Relay's database is its own: the call's id is read from the frame, a uuid.
        assert acked == {
            "type": "call_ack",
            "callId": "while-down",
            "call": str(UUID(acked["call"])),
            "status": "queued",
        }
