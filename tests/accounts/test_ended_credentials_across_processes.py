"""Credentials ended at one web process are refused by another on its very next request (issue
40): a logout, a session ended from another, a regenerated API key, a changed password. Each
process authenticates every request with one read of the database and keeps nothing of it
(tests/accounts/test_round_trips.py counts that read), so there is no cache to go stale; these
tests hold that true on two real Relays (gunicorn, the test's database and Redis), each
having just served the credentials before they end. One pair of processes serves the module;
each test registers a user of its own."""

import uuid

import pytest
from rest_framework_simplejwt.tokens import AccessToken

from harness.live import RelayProcess, http

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

PASSWORD = "a-long-passphrase-across"
ME, NUMBERS = "/api/user/me", "/api/numbers"


@pytest.fixture(scope="module")
def relays(tmp_path_factory, django_db_setup):
    """Two Relays on the test's database: `first` where credentials end, `second` where the
    next request goes."""
    started = []
    try:
        for name in ("first", "second"):
            started.append(
                RelayProcess(
                    tmp_path_factory.mktemp(name),
                    "--no-worker",
                    RATE_LIMIT_AUTH_PER_IP="1000/m",
                    log=tmp_path_factory.getbasetemp() / f"{name}.log",
                )
            )
        yield started
    finally:
        for process in reversed(started):
            process.stop()


def status(relay, path, *, token=None, key=None, method="GET", body=None) -> int:
    headers = {"X-API-Key": key} if key else None
    answer, payload = http(method, f"{relay.base}{path}", body, token, headers=headers)
    if answer == 401:
        assert payload["code"] == "authentication_failed", payload
    return answer


def register(relay) -> dict:
    """A new account, registered at `relay`: its JWT and API key."""
    credentials = {"email": f"across-{uuid.uuid4().hex[:12]}@example.com", "password": PASSWORD}
    answer, body = http("POST", f"{relay.base}/api/auth/register", credentials)
    assert answer == 201, body
    return {"email": credentials["email"], "token": body["token"], "key": body["user"]["apiKey"]}


def log_in(relay, email) -> str:
    body = {"email": email, "password": PASSWORD}
    answer, payload = http("POST", f"{relay.base}/api/auth/login", body)
    assert answer == 200, payload
    return payload["token"]


def served(relay, **credentials) -> bool:
    """`relay` answers /me (its read with the profile) and /numbers (the plain read)."""
    return status(relay, ME, **credentials) == status(relay, NUMBERS, **credentials) == 200


def test_a_logout_is_refused_by_the_other_process_on_its_next_request(relays):
    first, second = relays
    account = register(first)
    assert served(second, token=account["token"])

    assert status(first, "/api/auth/logout", token=account["token"], method="POST") == 200

    assert status(second, ME, token=account["token"]) == 401
    assert status(second, NUMBERS, token=account["token"]) == 401
    assert status(first, ME, token=account["token"]) == 401


def test_a_session_ended_from_another_is_refused_by_the_other_process(relays):
    first, second = relays
    account = register(first)
    other = log_in(second, account["email"])
    assert served(second, token=other)

    ended = AccessToken(other)["sid"]
    answer = status(first, f"/api/user/sessions/{ended}", token=account["token"], method="DELETE")
    assert answer == 200

    assert status(second, ME, token=other) == 401
    assert status(second, NUMBERS, token=other) == 401
    assert served(second, token=account["token"])


def test_a_regenerated_api_key_is_refused_by_the_other_process(relays):
    first, second = relays
    account = register(first)
    assert served(second, key=account["key"])

    answer, body = http(
        "POST", f"{first.base}/api/user/regenerate-api-key", headers={"X-API-Key": account["key"]}
    )
    assert answer == 200, body

    assert status(second, ME, key=account["key"]) == 401
    assert status(second, NUMBERS, key=account["key"]) == 401
    assert served(second, key=body["apiKey"])


def test_a_changed_password_ends_the_other_sessions_at_the_other_process(relays):
    first, second = relays
    account = register(first)
    other = log_in(second, account["email"])
    assert served(second, token=other)

    change = {"currentPassword": PASSWORD, "newPassword": "another-long-passphrase-across"}
    answer = status(first, "/api/user/password", token=account["token"], method="POST", body=change)
    assert answer == 204

    assert status(second, ME, token=other) == 401
    assert status(second, NUMBERS, token=other) == 401
    # The session that changed it stays, as does the API key.
    assert served(second, token=account["token"])
    assert served(second, key=account["key"])
