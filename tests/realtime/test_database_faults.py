"""PostgreSQL restarted under a live server: 503 JSON while it is down, success after."""

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from django.db import connection

from tests.live import ROOT, PrivatePostgres, RelayProcess, relay_env

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not shutil.which("runuser"),
        reason="runs on the PostgreSQL pass, against a private cluster",
    ),
    pytest.mark.timeout(300),
]


def http(method, url, body=None, token=None):
    request = urllib.request.Request(  # noqa: S310 - the test's own server
        url, data=json.dumps(body).encode() if body is not None else None, method=method
    )
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def test_requests_answer_503_json_while_postgres_is_down_and_succeed_after(tmp_path):
    postgres = PrivatePostgres()
    env = {"DATABASE_URL": postgres.url}
    relay = None
    try:
        subprocess.run(  # noqa: S603
            [sys.executable, "manage.py", "migrate", "-v", "0"],
            cwd=ROOT,
            env=relay_env(tmp_path / "relay", **env),
            check=True,
        )
        relay = RelayProcess(tmp_path / "relay", **env)
        status, body, _ = http(
            "POST",
            f"{relay.base}/api/auth/register",
            {"email": "pg@example.com", "password": "a-long-passphrase-pg"},
        )
        assert status == 201
        token = body["token"]

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
    finally:
        if relay is not None:
            relay.stop()
        postgres.remove()
