"""Django's Redis cache's own client (a private attribute of RedisCache): the rate limits
count several windows in one pipelined round trip, where the cache API takes three a key."""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache


def redis_client(backend: RedisCache):
    """The redis-py client that `backend` writes through."""
    return backend._cache.get_client(write=True)
