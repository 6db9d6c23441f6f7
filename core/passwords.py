"""Password hashing: Argon2id at the parameters the environment sets, and a cap on how many
hashes run at once on the machine (every process sharing the var directory).

Users' passwords and numbers' PINs go through the same hasher (Django's make_password and
check_password), so this is the kernel's, not one app's.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth.hashers import Argon2PasswordHasher

from core.errors import ApplicationError, ErrorCode

RETRY_AFTER_SECONDS = 1


class ConfiguredArgon2PasswordHasher(Argon2PasswordHasher):
    """Django's Argon2 hasher (argon2id, version 19) with time cost, memory cost (KiB) and
    lanes from settings (PASSWORD_ARGON2_*, checked at start-up) instead of Django's
    constants.

    The algorithm name stays `argon2`: hashes are stored exactly as Django's own hasher
    stores them, so either verifies the other's, and Django's must_update re-hashes, on the
    next successful login, a stored hash whose parameters differ from these.
    """

    @property
    def time_cost(self) -> int:
        return settings.PASSWORD_ARGON2_TIME_COST

    @property
    def memory_cost(self) -> int:
        return settings.PASSWORD_ARGON2_MEMORY_KIB

    @property
    def parallelism(self) -> int:
        return settings.PASSWORD_ARGON2_PARALLELISM


class PasswordHashingBusy(ApplicationError):
    """The hashing queue is full, or a request waited its longest: 503 with Retry-After."""

    code = ErrorCode.SERVICE_UNAVAILABLE
    message = "The server is busy checking other passwords. Try again in a second."

    def __init__(self, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(headers={"Retry-After": str(max(1, retry_after))})


def _slots_dir() -> Path:
    directory = Path(settings.PASSWORD_HASHING_SLOTS_DIR)
    (directory / QUEUE).mkdir(parents=True, exist_ok=True)
    return directory


def _take_slot() -> int | None:
    """Lock one of the PASSWORD_HASH_CONCURRENCY slot files without waiting; its descriptor,
    or None when every slot is locked.

    A slot is an exclusive flock on a file under PASSWORD_HASHING_SLOTS_DIR, so the cap holds
    across every process and thread that shares the directory: gunicorn's workers are
    separate processes, and a cap per process would let a flood of logins hold every one of
    them. The kernel releases a dead process's locks, so a crash cannot leak a slot.
    """
    size = settings.PASSWORD_HASH_CONCURRENCY
    directory = _slots_dir()
    first = os.getpid() % size  # processes start their search at different slots
    for step in range(size):
        descriptor = _locked(directory / f"slot-{(first + step) % size}", fcntl.LOCK_EX)
        if descriptor is not None:
            return descriptor
    return None


def _locked(path: Path, how: int) -> int | None:
    """`path` opened (created if need be) and flocked `how` without waiting, or None."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, how | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


# The queue: a directory of ticket files, `ticket-<n>`, each flocked by the request waiting
# with it (a ticket whose file can be locked by anyone else belongs to a request that is gone:
# served, given up or dead, since the kernel drops a dead process's locks). Tickets are
# numbered in order of arrival from a counter in QUEUE/STATE, read and written under an
# exclusive flock of that file, which also keeps the hash time every holder reports.
QUEUE = "queue"
STATE = "state"
POLL_SECONDS = 0.002  # how often the next waiter looks whether its turn has come
DEFAULT_HASH_SECONDS = 0.1  # until a hash has been timed here


@contextmanager
def _state() -> Iterator[dict]:
    """The queue's shared state ({"next": ticket number, "hash": seconds one hash takes}),
    locked for the block and written back after it."""
    path = _slots_dir() / QUEUE / STATE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        raw = os.pread(descriptor, 64, 0).decode("ascii", "replace").split()
        try:
            state = {"next": int(raw[0]), "hash": float(raw[1])}
        except (IndexError, ValueError):
            state = {"next": 0, "hash": DEFAULT_HASH_SECONDS}
        yield state
        data = f"{state['next']} {state['hash']:.6f}".encode()
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, data, 0)
    finally:
        os.close(descriptor)  # and its lock


def _waiting(queue: Path) -> list[tuple[int, Path]]:
    """The tickets of the requests still waiting, oldest first; a ticket left behind by a
    request that is gone is removed. Called with the state locked."""
    waiting = []
    for entry in os.scandir(queue):
        if not entry.name.startswith("ticket-"):
            continue
        descriptor = _locked(Path(entry.path), fcntl.LOCK_SH)
        if descriptor is None:
            waiting.append((int(entry.name[len("ticket-") :]), Path(entry.path)))
            continue
        os.close(descriptor)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.path)
    return sorted(waiting)


def _join_queue() -> tuple[int, Path, list[int], float]:
    """Take a ticket: its descriptor (the lock that says this request waits) and file, the
    descriptors of the tickets ahead of it (each locked by a request still waiting), and
    when to give up. PasswordHashingBusy at once when the queue holds more than fits in
    PASSWORD_HASH_WAIT_SECONDS, or PASSWORD_HASH_QUEUE_MAX."""
    queue = _slots_dir() / QUEUE
    slots = settings.PASSWORD_HASH_CONCURRENCY
    wait = settings.PASSWORD_HASH_WAIT_SECONDS
    with _state() as state:
        waiting = _waiting(queue)
        fits = int(slots * wait / max(state["hash"], 0.001))
        if len(waiting) >= min(fits, settings.PASSWORD_HASH_QUEUE_MAX):
            raise PasswordHashingBusy(math.ceil((len(waiting) + 1) * state["hash"] / slots))
        ticket, state["next"] = state["next"], state["next"] + 1
        # Locked before it has its name, so that nobody ever sees it unlocked.
        spare = queue / f"new-{os.getpid()}-{threading.get_ident()}"
        mine, path = _locked(spare, fcntl.LOCK_EX), queue / f"ticket-{ticket}"
        os.rename(spare, path)
    ahead = []
    for _, earlier in waiting:
        with contextlib.suppress(FileNotFoundError):
            ahead.append(os.open(earlier, os.O_RDONLY | os.O_CLOEXEC))
    return mine, path, ahead, time.monotonic() + wait


def _still_waiting(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    return False


def _queued_slot() -> int:
    """Wait in the queue for a slot: the descriptor of the slot, taken in the order the
    requests came (with one slot, exactly; with more, a request tries once fewer than that
    many are still waiting ahead of it). PasswordHashingBusy when the queue is full, or when
    the wait runs out."""
    mine, path, ahead, deadline = _join_queue()
    slots = settings.PASSWORD_HASH_CONCURRENCY
    try:
        while True:
            while ahead and not _still_waiting(ahead[0]):
                os.close(ahead.pop(0))
            if sum(1 for d in ahead[:slots] if _still_waiting(d)) < slots:
                descriptor = _take_slot()
                if descriptor is not None:
                    return descriptor
            if time.monotonic() >= deadline:
                raise PasswordHashingBusy()
            # A waiter with n others ahead cannot be served before n - slots + 1 more hashes
            # end: it looks less often, so that dozens waiting on threads cost no CPU the
            # hash needs.
            time.sleep(POLL_SECONDS * max(1, len(ahead) - slots + 1))
    finally:
        for descriptor in ahead:
            os.close(descriptor)
        os.unlink(path)  # only its holder removes a locked ticket
        os.close(mine)


def _queue_empty() -> bool:
    return not any(name.startswith("ticket-") for name in os.listdir(_slots_dir() / QUEUE))


@contextmanager
def password_hashing_slot() -> Iterator[None]:
    """Hold one hashing slot for the block, waiting for it in the host-wide queue when every
    slot is taken or others already wait (_queued_slot); PasswordHashingBusy (503) when the
    queue is full or the wait runs out.

    Every request path that hashes or checks a password or PIN runs that work in a slot,
    all of the operation's hashes in one slot, before it writes anything: a refused request
    has changed nothing. The queue is bounded by what fits in PASSWORD_HASH_WAIT_SECONDS and
    by PASSWORD_HASH_QUEUE_MAX, so that under a flood refusals stay immediate and the
    waiting never holds every worker. The time each holder spends is reported to the queue,
    which sizes itself by it.
    """
    descriptor = _take_slot() if _queue_empty() else None
    if descriptor is None:
        descriptor = _queued_slot()
    started = time.monotonic()
    try:
        yield
    finally:
        held = time.monotonic() - started
        os.close(descriptor)  # closing the file releases its lock
        with contextlib.suppress(OSError), _state() as state:
            state["hash"] = 0.8 * state["hash"] + 0.2 * held


def hashes_passwords_on_post(view: Callable) -> Callable:
    """For a method of a plain Django view (the admin's) that checks or sets a password on
    POST: the POST runs in a hashing slot, and a busy process answers the 503 in Relay's
    error shape (DRF views get it from the exception handler)."""

    @functools.wraps(view)
    def wrapper(self, request, *args, **kwargs):
        if request.method != "POST":
            return view(self, request, *args, **kwargs)
        try:
            with password_hashing_slot():
                return view(self, request, *args, **kwargs)
        except PasswordHashingBusy as busy:
            return busy.as_response()

    return wrapper
