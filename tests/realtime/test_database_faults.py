"""PostgreSQL restarted under a live server: 503 JSON while it is down, success after."""

import shutil
import subprocess
import sys
from functools import partial

import pytest
from django.db import connection

from tests.live import ROOT, PrivatePostgres, RelayProcess, http_exchange, relay_env

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not shutil.which("runuser"),
        reason="runs on the PostgreSQL pass, against a private cluster",
    ),
    pytest.mark.timeout(300),
]


# Every exchange with headers; a request may wait out the server's attempt to reach the
# stopped database.
http = partial(http_exchange, timeout=20)


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
