"""Admission to the hashing queue (issue 40): a request's wait for a slot counts from when it
reached the server, its time in gunicorn's own queue included, and each process lends at most
PASSWORD_HASH_THREADS threads to requests that hash, so a flood of logins never holds the
threads everything else needs. Past either bound a request that hashes is refused 503
service_unavailable with Retry-After at once, before Django runs."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import psutil
import pytest
from django.db import connection

from core import passwords
from core.passwords import PasswordHashingBusy, password_hashing_slot, request_arrived
from harness.live import RelayProcess, cmdline, http, http_exchange, wait_until
from relay.admission import request_hashes
from relay.platform.gunicorn_worker import SPARE_HASHING_THREADS
from tests.accounts.test_hashing_queue import Request, queue_behind, waiting

BUSY = {
    "error": "The server is busy checking other passwords. Try again in a second.",
    "code": "service_unavailable",
}


@pytest.fixture
def queue(settings, tmp_path):
    """One slot, a 2 s wait, room for 8, two hashing threads, a queue of this test's own."""
    settings.PASSWORD_HASH_CONCURRENCY = 1
    settings.PASSWORD_HASH_WAIT_SECONDS = 2
    settings.PASSWORD_HASH_QUEUE_MAX = 8
    settings.PASSWORD_HASH_THREADS = 2
    settings.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "hashing-slots"
    return settings


def test_a_request_that_arrived_its_whole_wait_ago_is_refused_though_a_slot_is_free(queue):
    with (
        request_arrived(time.monotonic() - 2),
        pytest.raises(PasswordHashingBusy) as busy,
        password_hashing_slot(),
    ):
        pytest.fail("served after its wait had run out")

    assert busy.value.headers["Retry-After"] == "1"
    assert waiting(queue) == 0


def test_the_wait_left_after_the_servers_queue_bounds_what_may_queue_ahead(queue):
    # Hashes take 0.5 s here: a request that arrives now may wait behind three, but one that
    # already spent 1.2 s of its 2 s in the server's queue has room behind one only.
    queue.PASSWORD_HASH_THREADS = 8
    with passwords._state() as state:
        state["hash"] = 0.5
    queued = [Request(f"r{n}", []) for n in range(2)]
    with password_hashing_slot():
        queue_behind(queue, queued)
        with (
            request_arrived(time.monotonic() - 1.2),
            pytest.raises(PasswordHashingBusy),
            password_hashing_slot(),
        ):
            pytest.fail("queued behind more than fits in what was left of its wait")
    for request in queued:
        request.join(timeout=10)
    assert [r.outcome for r in queued] == ["served", "served"]


def test_a_process_lends_only_its_hashing_threads_to_requests_that_hash(queue):
    queue.PASSWORD_HASH_THREADS = 2
    queued = [Request("r0", [])]
    with password_hashing_slot():  # the first hashing thread: this one
        queue_behind(queue, queued)  # the second, waiting its turn
        late = Request("late", [])
        late.run()  # a third: none is left, refused without queueing
        assert waiting(queue) == 1
    queued[0].join(timeout=10)

    assert isinstance(late.outcome, PasswordHashingBusy), late.outcome
    assert queued[0].outcome == "served"
    assert passwords.hashing_threads_in_use() == 0  # every thread given back


# --- Live: gunicorn with its stamp and the admission before Django (relay/admission.py) -------


def held_connection(relay: RelayProcess, line: bytes = b"GET /healthz") -> socket.socket:
    """A client that sent half a request (`line`, then a header): gunicorn's thread reading it
    is held until the rest comes (finish_request). A login's line holds a hashing thread."""
    client = socket.create_connection(("127.0.0.1", relay.port), timeout=30)
    client.sendall(line + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return client


LOGIN_LINE = b"POST /api/auth/login"
PASSWORD = "a-long-passphrase-w"


def finish_request(client: socket.socket) -> bytes:
    client.sendall(b"Connection: close\r\n\r\n")
    answer = b""
    while chunk := client.recv(65536):
        answer += chunk
    client.close()
    return answer


def small_relay(tmp_path, *, wait: int, **env) -> RelayProcess:
    """One worker: one thread for everything else, one hashing thread (and the two spare),
    one hashing slot, a wait of `wait` seconds."""
    return RelayProcess(
        tmp_path / "relay", HTTP_WORKERS=1, HTTP_THREADS=1, PASSWORD_HASH_THREADS=1,
        PASSWORD_HASH_CONCURRENCY=1, PASSWORD_HASH_WAIT_SECONDS=wait, **env,
    )  # fmt: skip


def database_connections(relay: RelayProcess) -> int:
    """The connections to the database that the relay's gunicorn worker holds open."""
    port = int(connection.settings_dict["PORT"] or 5432)
    workers = [
        process
        for process in psutil.Process(relay.proc.pid).children(recursive=True)
        if "gunicorn" in " ".join(cmdline(process))
        and "gunicorn" in " ".join(cmdline(process.parent()))
    ]
    assert len(workers) == 1, workers
    held = workers[0].net_connections(kind="tcp")
    return sum(1 for held_one in held if held_one.raddr and held_one.raddr.port == port)


def register(relay: RelayProcess, email: str) -> dict:
    status, body = http(
        "POST", f"{relay.base}/api/auth/register", {"email": email, "password": PASSWORD}
    )
    assert status == 201, body
    return body


def log_in(relay: RelayProcess, email: str, answers: dict) -> threading.Thread:
    body = {"email": email, "password": PASSWORD}
    thread = threading.Thread(
        target=lambda: answers.update(
            {email: http_exchange("POST", f"{relay.base}/api/auth/login", body, timeout=60)}
        ),
        daemon=True,
    )
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_flood_of_logins_leaves_me_its_threads(queue, tmp_path):
    """Two threads for everything and two for hashing: with the only slot held here, four
    logins at once take the two hashing threads and wait, the other two are refused at once,
    and /me is answered while the two still wait. Before, the logins held every thread and
    /me waited behind them in gunicorn's queue."""
    relay = RelayProcess(
        tmp_path / "relay", HTTP_WORKERS=1, HTTP_THREADS=2, PASSWORD_HASH_THREADS=2,
        PASSWORD_HASH_CONCURRENCY=1, PASSWORD_HASH_WAIT_SECONDS=30,
    )  # fmt: skip
    queue.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "relay" / "hashing-slots"
    try:
        emails = [f"flood{n}@example.com" for n in range(4)]
        tokens = [register(relay, email)["token"] for email in emails]
        answers: dict = {}
        with password_hashing_slot():
            threads = [log_in(relay, email, answers) for email in emails]
            wait_until(lambda: waiting(queue) == 2 and len(answers) == 2, deadline=30,
                       what="two logins to queue and two to be refused")  # fmt: skip
            refused = list(answers.values())
            status, me = http("GET", f"{relay.base}/api/user/me", token=tokens[0])

            assert (status, me["email"]) == (200, emails[0])
            assert len(answers) == 2 and waiting(queue) == 2  # the two still wait their turn
        for thread in threads:
            thread.join(timeout=60)

        for status, body, headers in refused:
            assert (status, body, headers["Retry-After"]) == (503, BUSY, "1")
        assert sorted(status for status, _, _ in answers.values()) == [200, 200, 503, 503]
    finally:
        relay.stop()


@pytest.mark.django_db(transaction=True)
def test_a_login_that_waited_its_whole_wait_in_gunicorns_queue_is_refused_at_once(queue, tmp_path):
    """Every hashing thread of the worker (one, and the two spare) is held by a client still
    sending a login; a login waits behind them longer than PASSWORD_HASH_WAIT_SECONDS. When
    a thread frees, the login is refused, though the slot is free: its wait counts from its
    arrival. Before, the wait started when Django saw the login, which was then served
    seconds past the promise."""
    relay = small_relay(tmp_path, wait=1)
    try:
        email = "late@example.com"
        register(relay, email)
        held = [held_connection(relay, LOGIN_LINE) for _ in range(1 + SPARE_HASHING_THREADS)]
        answers: dict = {}
        sent = time.monotonic()
        thread = log_in(relay, email, answers)
        # Twice the wait, so that the login's stamp (taken when the worker accepted it, a
        # moment after it was sent) is past its wait too; nothing answers it meanwhile.
        wait_until(lambda: time.monotonic() - sent > 2, deadline=10, what="the wait to pass")
        assert not answers

        # The held login arrived before the wait too: refused as well, once it is whole.
        assert finish_request(held[0]).startswith(b"HTTP/1.1 503")
        thread.join(timeout=30)
        status, body, headers = answers[email]

        assert (status, body, headers["Retry-After"]) == (503, BUSY, "1")
        assert "X-Request-Id" in headers
        for client in held[1:]:
            finish_request(client)
        login = {"email": email, "password": PASSWORD}
        assert http("POST", f"{relay.base}/api/auth/login", login)[0] == 200
    finally:
        relay.stop()


@pytest.mark.django_db(transaction=True)
def test_logins_have_threads_of_their_own_that_other_requests_cannot_take(queue, tmp_path):
    """Both of the worker's threads for everything else (HTTP_THREADS 1 and, before, the
    hashing one beside it in one pool) are held by clients still sending; a login is served
    all the same, by a hashing thread."""
    relay = small_relay(tmp_path, wait=30)
    try:
        email = "own@example.com"
        register(relay, email)
        held = [held_connection(relay), held_connection(relay)]
        answers: dict = {}
        log_in(relay, email, answers).join(timeout=60)

        assert answers[email][0] == 200
        for client in held:
            assert finish_request(client).startswith(b"HTTP/1.1 200")
    finally:
        relay.stop()


@pytest.mark.django_db(transaction=True)
def test_me_is_served_while_every_hashing_thread_is_held(queue, tmp_path):
    """Every hashing thread (one, and the two spare) is held by a client still sending a
    login: /me goes by, to the other pool. Before, the held logins took every thread of the
    one pool and /me waited in its queue."""
    relay = small_relay(tmp_path, wait=30)
    try:
        email = "goes-by@example.com"
        token = register(relay, email)["token"]
        held = [held_connection(relay, LOGIN_LINE) for _ in range(1 + SPARE_HASHING_THREADS)]

        status, me = http("GET", f"{relay.base}/api/user/me", token=token)

        assert (status, me["email"]) == (200, email)
        for client in held:  # one at a time: each is a login without a body
            assert finish_request(client).startswith(b"HTTP/1.1 400")
        answers: dict = {}
        log_in(relay, email, answers).join(timeout=60)
        assert answers[email][0] == 200
    finally:
        relay.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite opens no connection")
def test_the_hashing_threads_keep_no_database_connection(queue, tmp_path):
    """Connections are kept between requests (DATABASE_CONN_MAX_AGE): the one thread for
    everything else keeps the one it opened for the start's health checks. A thread of the
    hashing pool closes its own after each request: with spare threads beside them, a worker
    still holds at most HTTP_THREADS + PASSWORD_HASH_THREADS, not one per thread."""
    relay = small_relay(tmp_path, wait=30, DATABASE_CONN_MAX_AGE=60)
    try:
        assert database_connections(relay) == 1  # /healthz's, on the other pool's thread
        email = "closes@example.com"
        register(relay, email)
        for _ in range(3):
            answers: dict = {}
            log_in(relay, email, answers).join(timeout=60)
            assert answers[email][0] == 200

        # Closed once each response is written: a moment after the client has it.
        wait_until(lambda: database_connections(relay) == 1, deadline=10,
                   what="the hashing threads to close their connections")  # fmt: skip
    finally:
        relay.stop()


# --- Which requests are admitted as hashing: the views marked `hashes_passwords` ------------


def concrete(path: str, parameters: list[dict]) -> str:
    """A schema path with each path parameter filled in with a value of its type."""
    for parameter in parameters:
        if parameter.get("in") == "path":
            kind = parameter.get("schema", {})
            value = str(uuid.uuid4()) if kind.get("format") == "uuid" else "1"
            path = path.replace("{" + parameter["name"] + "}", value)
    return path


def test_every_operation_documented_to_answer_busy_is_admitted_as_hashing_and_no_other(client):
    paths = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()[
        "paths"
    ]
    documented, admitted = set(), set()
    for path, operations in paths.items():
        for method, operation in operations.items():
            url = concrete(path, operation.get("parameters", []))
            busy = operation["responses"].get("503", {}).get("description", "")
            if "`service_unavailable`" in busy:
                documented.add((method, path))
            if request_hashes(method.upper(), url)[0]:
                admitted.add((method, path))

    assert ("post", "/api/auth/login") in documented
    assert admitted == documented


def test_the_admins_forms_that_hash_are_admitted_on_post_only():
    assert request_hashes("POST", "/admin/login/")[0]
    assert request_hashes("POST", "/admin/password_change/")[0]
    assert request_hashes("POST", "/admin/accounts/user/add/")[0]
    assert request_hashes("POST", f"/admin/accounts/user/{uuid.uuid4()}/password/")[0]
    assert not request_hashes("GET", "/admin/login/")[0]
    assert not request_hashes("GET", "/api/user/me")[0]
