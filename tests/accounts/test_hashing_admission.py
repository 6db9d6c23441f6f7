"""Admission to the hashing queue (issue 40): a request's wait for a slot counts from when it
reached the server, its time in gunicorn's own queue included, and each process lends at most
PASSWORD_HASH_THREADS threads to requests that hash, so a flood of logins never holds the
threads everything else needs. Past either bound a request that hashes is refused 503
service_unavailable with Retry-After at once, before Django runs."""

from __future__ import annotations

import time

import pytest

from core import passwords
from core.passwords import PasswordHashingBusy, password_hashing_slot, request_arrived
from tests.accounts.test_hashing_queue import Request, queue_behind, waiting


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
