"""Password hashing: Argon2id at the parameters the environment sets, and a per-process cap
on how many hashes run at once.

Users' passwords and numbers' PINs go through the same hasher (Django's make_password and
check_password), so this is the kernel's, not one app's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
    """Every hashing slot of this process is taken: 503 with Retry-After, at once."""

    code = ErrorCode.SERVICE_UNAVAILABLE
    message = "The server is busy checking other passwords. Try again in a second."

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


_slots_lock = threading.Lock()
_slots: dict[int, threading.BoundedSemaphore] = {}


def hashing_slots() -> threading.BoundedSemaphore:
    """This process's PASSWORD_HASH_CONCURRENCY slots. One semaphore per value of the
    setting, made once under a lock (two first requests must not get two semaphores);
    only tests change the value."""
    size = settings.PASSWORD_HASH_CONCURRENCY
    with _slots_lock:
        if size not in _slots:
            _slots[size] = threading.BoundedSemaphore(size)
        return _slots[size]


@contextmanager
def password_hashing_slot() -> Iterator[None]:
    """Hold one hashing slot for the block, or raise PasswordHashingBusy without waiting.

    Every request path that hashes or checks a password or PIN runs that work in a slot,
    all of the operation's hashes in one slot, before it writes anything: a refused request
    has changed nothing. Refusing at once, rather than queueing, keeps a flood of logins
    from holding every worker thread while the CPU works through the queue; the client's
    retry after Retry-After is the queue.
    """
    slots = hashing_slots()
    if not slots.acquire(blocking=False):
        raise PasswordHashingBusy()
    try:
        yield
    finally:
        slots.release()


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
