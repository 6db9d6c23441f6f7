"""The off switches of the servers' library edges, live: gunicorn under GUNICORN_RELAY_WORKER
on and off, Daphne under DAPHNE_JSON_REFUSALS on and off, each answering what clients see the
same way (tests/platform/edges.py)."""

import sys

import pytest

from tests.live import ChildProcess, free_port, http, relay_env

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

    assert workers == {True: "relay.gunicorn_worker.RelayThreadWorker", False: "gthread"}
    assert seen[False] == seen[True]
    assert [each[0] for each in seen[True]] == [201, 200, 200, 401]
