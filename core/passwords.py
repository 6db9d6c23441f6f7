"""Password hashing: Argon2id at the parameters the environment sets, and a cap on how many
hashes run at once on the machine (every process sharing the var directory).

Users' passwords and numbers' PINs go through the same hasher (Django's make_password and
check_password), so this is the kernel's, not one app's.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


def _join_queue(arrived: float | None) -> tuple[int, Path, list[int], float]:
    """Take a ticket: its descriptor (the lock that says this request waits) and file, the
    descriptors of the tickets ahead of it (each locked by a request still waiting), and
    when to give up: PASSWORD_HASH_WAIT_SECONDS after the request `arrived` at the server
    (after now when unknown). PasswordHashingBusy at once when the queue holds more than
    fits in what is left of that wait, or PASSWORD_HASH_QUEUE_MAX."""
    queue = _slots_dir() / QUEUE
    slots = settings.PASSWORD_HASH_CONCURRENCY
    with _state() as state:
        waiting = _waiting(queue)
        now = time.monotonic()
        deadline = (now if arrived is None else arrived) + settings.PASSWORD_HASH_WAIT_SECONDS
        fits = int(slots * max(0.0, deadline - now) / max(state["hash"], 0.001))
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
    return mine, path, ahead, deadline


def _still_waiting(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    return False


def _queued_slot(arrived: float | None) -> int:
    """Wait in the queue for a slot: the descriptor of the slot, taken in the order the
    requests came (with one slot, exactly; with more, a request tries once fewer than that
    many are still waiting ahead of it). PasswordHashingBusy when the queue is full, or when
    the wait runs out (_join_queue)."""
    mine, path, ahead, deadline = _join_queue(arrived)
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


# --- Admission: a request's wait counts from its arrival, and each process lends at most
# PASSWORD_HASH_THREADS of its threads to requests that hash ------------------------------ The
# server stamps when a request reached it (relay/platform/gunicorn_worker.py: the moment gunicorn
# queued the connection for a thread); relay/admission.py hands the stamp here for the request's
# duration. A request that waited in the server's own queue before reaching Django has that much
# less left of PASSWORD_HASH_WAIT_SECONDS for the hashing queue, so a login is served within the
# wait from its arrival, or refused.


@dataclass
class _Request:
    arrived: float | None  # time.monotonic() when the server received it, if it says
    holds_thread: bool = False  # it counts among the process's hashing threads


_request: contextvars.ContextVar[_Request | None] = contextvars.ContextVar(
    "password_hashing_request", default=None
)
_threads_lock = threading.Lock()
_threads_in_use = 0


def _take_thread() -> bool:
    global _threads_in_use
    with _threads_lock:
        if _threads_in_use >= settings.PASSWORD_HASH_THREADS:
            return False
        _threads_in_use += 1
        return True


def _give_back_thread() -> None:
    global _threads_in_use
    with _threads_lock:
        _threads_in_use -= 1


def hashing_threads_in_use() -> int:
    """How many of this process's threads serve a request that hashes (waiting or hashing)."""
    return _threads_in_use


@contextmanager
def request_arrived(moment: float | None) -> Iterator[None]:
    """For the block (one request), the request reached the server at `moment`
    (time.monotonic(); None when the server does not say, and the wait counts from the
    request's turn in the queue): its wait for a hashing slot counts from then. A hashing
    thread it took (admit_hashing_request) is given back at the end."""
    current = _Request(arrived=moment)
    token = _request.set(current)
    try:
        yield
    finally:
        _request.reset(token)
        if current.holds_thread:
            _give_back_thread()


def _arrived() -> float | None:
    """When the current request reached the server, if known."""
    current = _request.get()
    return current.arrived if current is not None else None


def _waited_its_wait() -> bool:
    """The current request spent all of PASSWORD_HASH_WAIT_SECONDS before its turn here, in
    the server's own queue. With no wait at all (0) a request is never too late: it takes a
    free slot or is refused, as the queue says."""
    current = _request.get()
    wait = settings.PASSWORD_HASH_WAIT_SECONDS
    if current is None or current.arrived is None or not wait:
        return False
    return time.monotonic() >= current.arrived + wait


def admit_hashing_request() -> None:
    """Before the view of a request that will hash (views marked `hashes_passwords`): take
    one of this process's PASSWORD_HASH_THREADS for the rest of the request. PasswordHashingBusy
    at once, before anything else runs, when the request already waited its whole
    PASSWORD_HASH_WAIT_SECONDS to get here or when every such thread is taken: the threads
    left serve everything else, so a flood of logins never holds all of them."""
    current = _request.get()
    if current is None or current.holds_thread:
        return  # outside a request the slot takes its thread itself (password_hashing_slot)
    if _waited_its_wait() or not _take_thread():
        raise PasswordHashingBusy()
    current.holds_thread = True


@contextmanager
def _hashing_thread() -> Iterator[None]:
    """This thread counts among the process's hashing threads for the block, unless its
    request was admitted already; PasswordHashingBusy at once when none is left."""
    current = _request.get()
    if current is not None and current.holds_thread:
        yield
        return
    if not _take_thread():
        raise PasswordHashingBusy()
    try:
        yield
    finally:
        _give_back_thread()


@contextmanager
def password_hashing_slot() -> Iterator[None]:
    """Hold one hashing slot for the block, waiting for it in the host-wide queue when every
    slot is taken or others already wait (_queued_slot); PasswordHashingBusy (503) when the
    queue is full, when the wait runs out, or at once when this process has no hashing
    thread left (PASSWORD_HASH_THREADS) or the request already waited its whole
    PASSWORD_HASH_WAIT_SECONDS since it reached the server (request_arrived).

    Every request path that hashes or checks a password or PIN runs that work in a slot,
    all of the operation's hashes in one slot, before it writes anything: a refused request
    has changed nothing. The queue is bounded by what fits in what is left of the wait and
    by PASSWORD_HASH_QUEUE_MAX, so that under a flood refusals stay immediate and the
    waiting never holds every worker. The time each holder spends is reported to the queue,
    which sizes itself by it.
    """
    with _hashing_thread():
        if _waited_its_wait():
            raise PasswordHashingBusy()
        descriptor = _take_slot() if _queue_empty() else None
        if descriptor is None:
            descriptor = _queued_slot(_arrived())
        started = time.monotonic()
        try:
            yield
        finally:
            held = time.monotonic() - started
            os.close(descriptor)  # closing the file releases its lock
            with contextlib.suppress(OSError), _state() as state:
                state["hash"] = 0.8 * state["hash"] + 0.2 * held


HASHES_PASSWORDS = "hashes_passwords"


def hashes_passwords(view: Callable) -> Callable:
    """Marks a view, or a ViewSet action, whose requests hash a password or PIN (it runs
    password_hashing_slot): relay/admission.py admits them before Django runs
    (admit_hashing_request), refusing at once what the hashing queue could not serve."""
    setattr(view, HASHES_PASSWORDS, True)
    return view


def view_hashes(view: Callable, method: str) -> bool:
    """Whether a request of `method` to the resolved `view` (a ViewSet's or APIView's
    as_view() function, or a plain view) hashes, by the `hashes_passwords` mark of the
    handler it reaches."""
    cls = getattr(view, "cls", None)
    if cls is not None:  # DRF: the action this method maps to, or the method's handler
        actions = getattr(view, "actions", None) or {}
        name = actions.get(method.lower(), method.lower())
        return bool(getattr(getattr(cls, name, None), HASHES_PASSWORDS, False))
    marked = getattr(view, HASHES_PASSWORDS, False)
    return method in marked if isinstance(marked, frozenset) else bool(marked)


def hashes_passwords_on_post(view: Callable) -> Callable:
    """For a method of a plain Django view (the admin's) that checks or sets a password on
    POST: the POST runs in a hashing slot, and a busy process answers the 503 in Relay's
    error shape (DRF views get it from the exception handler). Marked as hashing on POST
    (view_hashes), which the admin's URL wrappers keep (functools.update_wrapper)."""

    @functools.wraps(view)
    def wrapper(self, request, *args, **kwargs):
        if request.method != "POST":
            return view(self, request, *args, **kwargs)
        try:
            with password_hashing_slot():
                return view(self, request, *args, **kwargs)
        except PasswordHashingBusy as busy:
            return busy.as_response()

    setattr(wrapper, HASHES_PASSWORDS, frozenset({"POST"}))
    return wrapper
