"""The worker's transcription processes: an engine that dies with a message (its child gone)
fails that message and leaves a new pool of the same size for the next one, without the
worker's thread waiting forever on the pool's lock."""

import os
import signal
import threading
from concurrent.futures.process import BrokenProcessPool

import psutil
import pytest

from history import tasks

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def processes():
    tasks.transcribe_in_processes(1)
    yield
    # A deadlocked pool (the defect this file guards against) holds the lock: fail, not hang.
    assert tasks._processes_lock.acquire(timeout=10), "the pool's lock is held for good"
    try:
        pool, tasks._processes = tasks._processes, None
    finally:
        tasks._processes_lock.release()
    pool.shutdown(cancel_futures=True)


def run_engine_in_a_thread() -> list:
    """_run_engine of the "off" engine in a thread of its own: what it raised, once it ends."""
    raised = []

    def run():
        try:
            tasks._run_engine("off", b"")
        except BaseException as error:  # noqa: BLE001 - what it raised is the test's
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)  # a stuck one must not hold the run
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the worker's thread never came back from the pool"
    return raised


def test_a_child_that_died_fails_its_message_and_a_new_pool_of_the_same_size_follows(processes):
    first = tasks._processes
    assert run_engine_in_a_thread()  # "off" has no engine: the child answers with an error
    children = psutil.Process().children()
    assert children, "the pool started no child"
    for child in children:
        os.kill(child.pid, signal.SIGKILL)
    psutil.wait_procs(children, timeout=30)

    raised = run_engine_in_a_thread()

    assert len(raised) == 1 and isinstance(raised[0], BrokenProcessPool), raised
    second = tasks._processes
    assert second is not first and second is not None
    assert second._max_workers == 1  # noqa: SLF001 - the test reads the pool's size
    assert run_engine_in_a_thread()  # the new pool answers (the engine's own error again)
