"""The hashing queue (issue 29): a request that finds every hashing slot taken waits its turn,
in the order the requests came, across threads and processes; it is refused at once (503,
Retry-After) only when the queue already holds more than fits in PASSWORD_HASH_WAIT_SECONDS
or PASSWORD_HASH_QUEUE_MAX, and after the wait when its turn never came. A waiter that dies
leaves no trace in the queue."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from core import passwords
from core.passwords import PasswordHashingBusy, password_hashing_slot
from harness.live import ROOT, RelayProcess, http, relay_env, wait_until
from tests.factories import DEFAULT_PASSWORD, UserFactory


@pytest.fixture
def queue(settings, tmp_path):
    """One slot, a 2 s wait, room for 8, and a queue of this test's own."""
    settings.PASSWORD_HASH_CONCURRENCY = 1
    settings.PASSWORD_HASH_WAIT_SECONDS = 2
    settings.PASSWORD_HASH_QUEUE_MAX = 8
    settings.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "hashing-slots"
    return settings


def well_within_the_wait(settings) -> float:
    """A bound for "at once", relative to the wait: a request that waits for a turn that never
    comes is refused only after PASSWORD_HASH_WAIT_SECONDS, so half of that tells the two
    apart with room to spare on a machine that other tests keep busy (pytest-xdist), where a
    fixed bound of a few hundred milliseconds measured the machine instead."""
    return settings.PASSWORD_HASH_WAIT_SECONDS / 2


def waiting(settings) -> int:
    """How many tickets the queue holds."""
    queue = settings.PASSWORD_HASHING_SLOTS_DIR / passwords.QUEUE
    if not queue.exists():
        return 0
    return sum(1 for p in queue.iterdir() if p.name.startswith("ticket-"))


class Request(threading.Thread):
    """A request hashing in a slot for `hold` seconds: what happened, and when it got in."""

    def __init__(self, name: str, served: list, hold: float = 0.0) -> None:
        super().__init__(name=name, daemon=True)
        self.served, self.hold = served, hold
        self.outcome: str | PasswordHashingBusy | None = None
        self.elapsed = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            with password_hashing_slot():
                self.served.append(self.name)
                time.sleep(self.hold)  # the hash
            self.outcome = "served"
        except PasswordHashingBusy as busy:
            self.outcome = busy
        self.elapsed = time.monotonic() - started


def queue_behind(queue, requests: list[Request]) -> None:
    """Start `requests` one by one, each once the one before it holds its ticket, while the
    caller holds the only slot: they queue in that order."""
    for count, request in enumerate(requests, start=1):
        request.start()
        wait_until(lambda c=count: waiting(queue) == c, deadline=5, what=f"{count} waiting")


def late_behind(queue, queued: list[Request]) -> Request:
    """One more request, run in this thread once `queued` wait behind the held slot; every
    request is through when this returns."""
    with password_hashing_slot():
        queue_behind(queue, queued)
        late = Request("late", [])
        late.run()  # in this thread: it must not wait
    for request in queued:
        request.join(timeout=10)
    return late


def test_requests_that_find_the_slot_taken_are_served_in_the_order_they_came(queue):
    served: list[str] = []
    requests = [Request(f"r{n}", served, hold=0.01) for n in range(6)]
    with password_hashing_slot():
        queue_behind(queue, requests)
    for request in requests:
        request.join(timeout=10)

    assert [r.outcome for r in requests] == ["served"] * 6
    assert served == [r.name for r in requests]
    assert waiting(queue) == 0  # every ticket is cleared away


def test_a_full_queue_refuses_at_once_with_retry_after(queue):
    queue.PASSWORD_HASH_QUEUE_MAX = 2
    queued = [Request(f"r{n}", []) for n in range(2)]
    late = late_behind(queue, queued)

    assert isinstance(late.outcome, PasswordHashingBusy), late.outcome
    assert late.elapsed < well_within_the_wait(queue), late.elapsed  # it never waited
    assert int(late.outcome.headers["Retry-After"]) >= 1
    assert [r.outcome for r in queued] == ["served", "served"]


def test_the_queue_holds_only_what_fits_in_the_wait(queue):
    # Hashes here take 0.5 s: in a 2 s wait, with one slot, four may wait; a fifth is told
    # to come back once the four and itself are through (2.5 s: 3 s, rounded up).
    with passwords._state() as state:
        state["hash"] = 0.5
    queued = [Request(f"r{n}", []) for n in range(4)]
    late = late_behind(queue, queued)

    assert isinstance(late.outcome, PasswordHashingBusy)
    assert late.outcome.headers["Retry-After"] == "3"
    assert [r.outcome for r in queued] == ["served"] * 4


def test_a_request_whose_turn_never_comes_is_refused_after_the_wait(queue):
    queue.PASSWORD_HASH_WAIT_SECONDS = 0.5
    with password_hashing_slot():
        request = Request("r", [])
        request.run()

    assert isinstance(request.outcome, PasswordHashingBusy)
    assert 0.5 <= request.elapsed < 1.5, request.elapsed
    assert waiting(queue) == 0


WAIT_IN_THE_QUEUE = """
from core.passwords import password_hashing_slot
with password_hashing_slot():
    pass
"""


def test_a_waiter_that_dies_in_the_queue_holds_nobody_up(queue, tmp_path):
    env = relay_env(
        tmp_path,
        PASSWORD_HASH_CONCURRENCY=1,
        PASSWORD_HASH_WAIT_SECONDS=30,
        PASSWORD_HASHING_SLOTS_DIR=queue.PASSWORD_HASHING_SLOTS_DIR,
    )
    with password_hashing_slot():
        waiter = subprocess.Popen(  # noqa: S603 - our own command
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", WAIT_IN_THE_QUEUE],
            cwd=ROOT,
            env=env,
        )
        try:
            wait_until(lambda: waiting(queue) == 1, deadline=30, what="the other process to queue")
        finally:
            waiter.kill()
            waiter.wait(timeout=10)
        # Its ticket is still there, but nobody holds it.
        assert waiting(queue) == 1
    # The queue took this test's hold (as long as a process takes to start: seconds on a busy
    # machine) for a hash, and a hash longer than the wait leaves room for nobody to wait:
    # the estimate goes back to what a request would find after real hashes.
    with passwords._state() as state:
        state["hash"] = passwords.DEFAULT_HASH_SECONDS
    started = time.monotonic()
    with password_hashing_slot():  # not held up by the dead waiter's ticket
        pass

    assert time.monotonic() - started < well_within_the_wait(queue)
    assert waiting(queue) == 0


@pytest.mark.django_db(transaction=True)
def test_logins_at_the_same_moment_all_succeed_with_one_slot(queue, real_hashers, api_client):
    from rest_framework.test import APIClient

    users = [UserFactory() for _ in range(4)]
    statuses: list[int] = []

    def log_in(email: str) -> None:
        response = APIClient().post(
            "/api/auth/login", {"email": email, "password": DEFAULT_PASSWORD}, "json"
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=log_in, args=(u.email,)) for u in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(statuses) == [200] * 4


@pytest.mark.django_db(transaction=True)
def test_a_login_waiting_its_turn_holds_a_thread_and_the_workers_others_serve(queue, tmp_path):
    """gunicorn's one worker here has threads: while a login waits in the queue (this test
    holds the slot), /me is answered by another thread. With sync workers it waited in the
    listen backlog until the login was done."""
    relay = RelayProcess(
        tmp_path / "relay", HTTP_WORKERS=1, HTTP_THREADS=4, PASSWORD_HASH_CONCURRENCY=1,
        PASSWORD_HASH_WAIT_SECONDS=30,
    )  # fmt: skip
    queue.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "relay" / "hashing-slots"
    try:
        credentials = {"email": "waits@example.com", "password": "a-long-passphrase-w"}
        status, body = http("POST", f"{relay.base}/api/auth/register", credentials)
        assert status == 201
        login: dict = {}
        with password_hashing_slot():
            waiter = threading.Thread(
                target=lambda: login.update(answer=http("POST", f"{relay.base}/api/auth/login",
                                                        credentials, timeout=60)),
            )  # fmt: skip
            waiter.start()
            wait_until(lambda: waiting(queue) == 1, deadline=30, what="the login to queue")

            status, me = http("GET", f"{relay.base}/api/user/me", token=body["token"])

            assert (status, me["email"]) == (200, "waits@example.com")
            assert "answer" not in login  # still waiting its turn
        waiter.join(timeout=60)
        assert login["answer"][0] == 200
    finally:
        relay.stop()
