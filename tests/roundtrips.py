"""Round trips to Redis, counted the way the database's are (pytest-django's
django_assert_max_num_queries): every request redis-py writes to a connection, a pipeline's
commands together being one. An instrument on the real client, never a stand-in: the commands
still reach the machine's Redis (the PostgreSQL + Redis pass), and where Redis is not
configured (the embedded default) nothing is counted, since nothing goes there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from redis.asyncio.connection import AbstractConnection as AsyncConnection
from redis.connection import AbstractConnection


@dataclass
class RedisRoundTrips:
    """What was sent: `count` round trips, and the name of the first command of each."""

    commands: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.commands)


def _first_command(packed) -> str:
    data = packed if isinstance(packed, bytes | str) else b"".join(map(bytes, packed))
    data = data.decode("latin-1") if isinstance(data, bytes) else data
    # RESP: *<n>\r\n$<len>\r\n<COMMAND>\r\n...
    parts = data.split("\r\n")
    return parts[2].upper() if len(parts) > 2 else "?"


# What a connection sends once, as it opens: not a round trip of the operation measured.
CONNECTION_SETUP = {"HELLO", "AUTH", "SELECT", "CLIENT", "READONLY"}


@contextmanager
def redis_round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisRoundTrips]:
    """Count the round trips to Redis of sync and async clients alike within the block (a
    new connection's own setup aside)."""
    seen = RedisRoundTrips()
    sync_send = AbstractConnection.send_packed_command
    async_send = AsyncConnection.send_packed_command

    def note(command) -> None:
        name = _first_command(command)
        if name not in CONNECTION_SETUP:
            seen.commands.append(name)

    def counted(self, command, check_health=True):
        note(command)
        return sync_send(self, command, check_health)

    async def counted_async(self, command, check_health=True):
        note(command)
        return await async_send(self, command, check_health)

    with monkeypatch.context() as patched:
        patched.setattr(AbstractConnection, "send_packed_command", counted)
        patched.setattr(AsyncConnection, "send_packed_command", counted_async)
        yield seen


@pytest.fixture
def redis_counter(monkeypatch):
    """`with redis_counter() as sent:` ... `assert sent.count <= 1`."""
    return lambda: redis_round_trips(monkeypatch)
