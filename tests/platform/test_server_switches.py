"""The off switches of the servers' library edges, live: gunicorn under GUNICORN_RELAY_WORKER
on and off, Daphne under DAPHNE_JSON_REFUSALS on and off, each answering what clients see the
same way (tests/platform/edges.py)."""

import socket
import sys

import pytest

from harness.live import ChildProcess, DaphneProcess, http, relay_env
from harness.ports import free_port

PASSWORD = "a-long-passphrase-w"


class Gunicorn(ChildProcess):
    """gunicorn with Relay's configuration alone on a free port, its log kept."""

    def __init__(self, var_dir, **env):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "gunicorn", "-c", "python:relay.gunicorn_conf"]
        argv += ["-b", f"127.0.0.1:{self.port}", "relay.wsgi:application"]
        environ = {"PUBLIC_URL": self.base, **relay_env(var_dir, **env)}
        var_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(argv, environ, log=var_dir / "gunicorn.log")
        self.wait_serving(f"{self.base}/healthz", what="gunicorn")


def _what_a_client_sees(server: Gunicorn, email: str) -> list:
    """Register, log in (a request that hashes), /me with the token and without."""
    seen = []
    status, body = http("POST", f"{server.base}/api/auth/register",
                        {"email": email, "password": PASSWORD})  # fmt: skip
    seen.append((status, sorted(body)))
    status, body = http("POST", f"{server.base}/api/auth/login",
                        {"email": email, "password": PASSWORD})  # fmt: skip
    seen.append((status, sorted(body)))
    status, me = http("GET", f"{server.base}/api/user/me", token=body["token"])
    seen.append((status, me["email"] == email, sorted(me)))
    seen.append(http("GET", f"{server.base}/api/user/me"))
    return seen


@pytest.mark.django_db(transaction=True)
def test_gunicorns_own_gthread_answers_as_relays_worker(tmp_path):
    seen, workers = {}, {}
    for relay_worker in (True, False):
        server = Gunicorn(tmp_path / str(relay_worker), GUNICORN_RELAY_WORKER=str(relay_worker))
        try:
            seen[relay_worker] = _what_a_client_sees(server, f"{relay_worker}@example.com")
        finally:
            server.stop()
        log = server.log_path.read_text()
        workers[relay_worker] = log.partition("Using worker: ")[2].partition("\n")[0]

    assert workers == {True: "relay.platform.gunicorn_worker.RelayThreadWorker", False: "gthread"}
    assert seen[False] == seen[True]
    assert [each[0] for each in seen[True]] == [201, 200, 200, 401]


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    return received


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
NO_COLON = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n"


@pytest.mark.django_db(transaction=True)
def test_twisteds_own_channel_serves_as_relays_and_refuses_with_a_bare_400(tmp_path):
    answers = {}
    for json_refusals in (True, False):
        daphne = DaphneProcess(tmp_path / str(json_refusals), DAPHNE_JSON_REFUSALS=json_refusals)
        try:
            head, _, body = _raw(daphne.port, HEALTHZ).partition(b"\r\n\r\n")
            status_line = head.split(b"\r\n", 1)[0]
            answers[json_refusals] = (status_line, body, _raw(daphne.port, NO_COLON))
        finally:
            daphne.stop()

    assert (
        answers[True][:2]
        == answers[False][:2]
        == (
            b"HTTP/1.1 200 OK",
            b'{"status": "ok", "database": "ok", "channelLayer": "ok"}',
        )
    )
    on, off = answers[True][2], answers[False][2]
    assert on.startswith(b"HTTP/1.1 400 ") and on.endswith(b'"code": "invalid_request"}')
    assert off == b"HTTP/1.1 400 Bad Request\r\n\r\n"  # Twisted's own refusal
