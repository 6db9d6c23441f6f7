"""Round trips counted, not timed (issue 40): what this process sends to Redis.

The database side needs nothing of its own: pytest-django's `django_assert_num_queries` and
`django_assert_max_num_queries` count the queries of Django's connections. For Redis,
`count_redis()` counts what redis-py sends, from sync and asyncio clients alike: Django's
Redis cache (the rate limits), channels-redis' channel layer, any client a test builds. It
wraps `send_packed_command` of redis-py's connections, which every command and every
pipeline goes through, and reads the commands out of the bytes sent (RESP arrays), so a
pipeline counts as one round trip and as each of its commands:

    with count_redis() as redis_sent:
        client.get("/api/user/me")
    assert redis_sent.commands <= 1, redis_sent.names

It works against a real Redis (nothing stands in for one: the commands are counted on their
way to it, MONITOR-free) and counts 0 where the run has none (no REDIS_URL: the local-memory
cache and the in-memory channel layer send nothing). It counts every thread and event loop
of this process, and nothing of a child process. A connection's opening (HELLO, SELECT,
CLIENT SETINFO) and redis-py's health checks are sent like any command and are counted:
make a warm-up request first when they are not what the test is about.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from redis import connection as sync_connection
from redis.asyncio import connection as async_connection


@dataclass
class RedisSent:
    """What this process sent to Redis while counting."""

    round_trips: int = 0  # sends: a command alone, or a whole pipeline
    names: list[str] = field(default_factory=list)  # each command's name, upper case, in order
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def commands(self) -> int:
        return len(self.names)

    def _record(self, packed) -> None:
        names = command_names(packed)
        with self._lock:
            self.round_trips += 1
            self.names.extend(names)


def command_names(packed) -> list[str]:
    """The names of the commands in `packed`, as redis-py hands it to its socket (bytes, str,
    or a list of bytes and memoryviews): RESP arrays of bulk strings, one per command."""
    if isinstance(packed, str):
        packed = packed.encode()
    data = packed if isinstance(packed, bytes) else b"".join(bytes(chunk) for chunk in packed)
    names, at = [], 0
    while at < len(data):
        if data[at : at + 1] != b"*":
            raise ValueError(f"not a RESP array at byte {at}: {data[at : at + 20]!r}")
        end = data.index(b"\r\n", at)
        arguments, at = int(data[at + 1 : end]), end + 2
        for index in range(arguments):
            end = data.index(b"\r\n", at)
            length = int(data[at + 1 : end])
            argument = data[end + 2 : end + 2 + length]
            at = end + 2 + length + 2
            if index == 0:
                names.append(argument.decode("latin-1").upper())
    return names


@contextlib.contextmanager
def count_redis() -> Iterator[RedisSent]:
    """Count what this process sends to Redis inside the block (see the module)."""
    sent = RedisSent()
    sync_send = sync_connection.AbstractConnection.send_packed_command
    async_send = async_connection.AbstractConnection.send_packed_command

    def counted_sync_send(self, command, *args, **kwargs):
        sent._record(command)
        return sync_send(self, command, *args, **kwargs)

    async def counted_async_send(self, command, *args, **kwargs):
        sent._record(command)
        return await async_send(self, command, *args, **kwargs)

    sync_connection.AbstractConnection.send_packed_command = counted_sync_send
    async_connection.AbstractConnection.send_packed_command = counted_async_send
    try:
        yield sent
    finally:
        sync_connection.AbstractConnection.send_packed_command = sync_send
        async_connection.AbstractConnection.send_packed_command = async_send
