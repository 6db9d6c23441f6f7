"""Fixed-window rate limits counted in the shared cache (Redis when REDIS_URL is set), so a
limit holds across every gunicorn and Daphne process."""

import hashlib
import logging
import time
import weakref
from dataclasses import dataclass

from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache

from core.errors import RateLimited
from core.platform.cache import redis_client

logger = logging.getLogger(__name__)
_UNITS = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class Rate:
    count: int
    seconds: int

    @classmethod
    def parse(cls, text: str) -> "Rate":
        """'30/m' -> Rate(30, 60). Raises ValueError on anything else."""
        count, _, unit = text.partition("/")
        if unit not in _UNITS or not count.isdigit() or int(count) < 1:
            raise ValueError(f"rate must look like '30/m', not {text!r}")
        return cls(int(count), _UNITS[unit])


def _window_key(scope: str, ident: str, rate: Rate, now: float) -> tuple[str, int]:
    window = int(now // rate.seconds)
    # surrogatepass: an identifier is hashed whatever it holds, never refused here.
    digest = hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"rl:{scope}:{digest}:{window}", window


def _refused(rate: Rate, window: int, now: float) -> RateLimited:
    retry_after = int((window + 1) * rate.seconds - now) + 1
    return RateLimited(retry_after, limit=rate.count)


def hit(scope: str, ident: str, rate: str | Rate, *, now: float | None = None) -> None:
    """Count one attempt of `ident` under `scope`; raise RateLimited past the rate.

    The identifier is hashed so that e-mail addresses and IPs never sit in the cache in clear.
    While the cache is unreachable the limit fails open (logged): an outage of Redis must not
    take logins and calls down with it (docs/operations.md).
    """
    (refused,) = hit_many(scope, [ident], rate, now=now)
    if refused is not None:
        raise refused


def hit_many(
    scope: str, idents: list[str], rate: str | Rate, *, now: float | None = None
) -> list[RateLimited | None]:
    """`hit` for several attempts at once (a batch of submits), in one round trip to the
    cache: each ident counted once per time it appears, in order, and for each the refusal
    `hit` would have raised (RateLimited) or None. Fails open like `hit`."""
    rate = rate if isinstance(rate, Rate) else Rate.parse(rate)
    now = time.time() if now is None else now
    keys = [_window_key(scope, ident, rate, now) for ident in idents]
    try:
        counts = _count_many([key for key, _ in keys], rate.seconds + 1)
    except Exception:  # the cache backend's own connection errors
        logger.warning("rate limit store unavailable; allowing %s", scope, exc_info=True)
        return [None] * len(idents)
    return [
        _refused(rate, window, now) if count > rate.count else None
        for (_, window), count in zip(keys, counts, strict=True)
    ]


def check(scope: str, ident: str, rate: str | Rate, *, now: float | None = None) -> None:
    """Raise RateLimited when `hit` has already counted the rate's whole allowance for `ident`
    in this window; count nothing. For limits on failures (wrong codes): check before trying,
    `hit` after each failure, so that once the limit is reached even a right guess is refused
    and guessing learns nothing. Fails open like `hit`."""
    rate = rate if isinstance(rate, Rate) else Rate.parse(rate)
    now = time.time() if now is None else now
    key, window = _window_key(scope, ident, rate, now)
    try:
        count = cache.get(key) or 0
    except Exception:  # the cache backend's own connection errors
        logger.warning("rate limit store unavailable; allowing %s", scope, exc_info=True)
        return
    if int(count) >= rate.count:
        raise _refused(rate, window, now)


# One redis-py client per Redis cache backend: Django's backend builds a new client for every
# operation, and building one (its table of response callbacks) cost more CPU than the command.
_redis_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _count_many(keys: list[str], timeout: int) -> list[int]:
    """Each key's counter in its window, created with its expiry and incremented, in order (a
    key repeated is counted each time)."""
    backend = caches["default"]
    if isinstance(backend, RedisCache):
        return _count_in_redis_many(backend, keys, timeout)
    return [_count_in_cache(key, timeout) for key in keys]


def _count_in_cache(key: str, timeout: int) -> int:
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=timeout)
        return 1


def _count_in_redis_many(backend: RedisCache, keys: list[str], timeout: int) -> list[int]:
    """The windows' counters, each created with its expiry and incremented, all in one round
    trip (MULTI: SET NX EX, INCR for each key), where the cache API takes three a key."""
    client = _redis_clients.get(backend)
    if client is None:
        client = _redis_clients[backend] = redis_client(backend)
    pipe = client.pipeline(transaction=True)
    for key in keys:
        key = backend.make_and_validate_key(key)
        pipe.set(key, 0, ex=timeout, nx=True)
        pipe.incr(key)
    return pipe.execute()[1::2]
