"""Password hashing: Argon2id at the parameters the environment sets, and a cap on how many
hashes run at once on the machine (every process sharing the var directory).

Users' passwords and numbers' PINs go through the same hasher (Django's make_password and
check_password), so this is the kernel's, not one app's.
"""

from __future__ import annotations

import fcntl
import functools
import os
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
    """Every hashing slot is taken: 503 with Retry-After, at once."""

    code = ErrorCode.SERVICE_UNAVAILABLE
    message = "The server is busy checking other passwords. Try again in a second."

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def _take_slot() -> int | None:
    """Lock one of the PASSWORD_HASH_CONCURRENCY slot files without waiting; its descriptor,
    or None when every slot is locked.

    A slot is an exclusive flock on a file under PASSWORD_HASHING_SLOTS_DIR, so the cap holds
    across every process and thread that shares the directory: gunicorn's sync workers are
    separate processes, and a cap per process would let a flood of logins hold every one of
    them. The kernel releases a dead process's locks, so a crash cannot leak a slot.
    """
    size = settings.PASSWORD_HASH_CONCURRENCY
    directory = Path(settings.PASSWORD_HASHING_SLOTS_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    first = os.getpid() % size  # processes start their search at different slots
    for step in range(size):
        descriptor = os.open(
            directory / f"slot-{(first + step) % size}",
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
            0o600,
        )
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        return descriptor
    return None


@contextmanager
def password_hashing_slot() -> Iterator[None]:
    """Hold one hashing slot for the block, or raise PasswordHashingBusy without waiting.

    Every request path that hashes or checks a password or PIN runs that work in a slot,
    all of the operation's hashes in one slot, before it writes anything: a refused request
    has changed nothing. Refusing at once, rather than queueing, keeps a flood of logins
    from holding every worker while the CPU works through the queue; the client's retry
    after Retry-After is the queue.
    """
    descriptor = _take_slot()
    if descriptor is None:
        raise PasswordHashingBusy()
    try:
        yield
    finally:
        os.close(descriptor)  # closing the file releases its lock


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
