"""channels-redis with every Redis operation bounded in time and no stale connections.

Three defects of channels-redis 4 on redis-py 8 and Python 3.11 together left a socket open
and silent after Redis restarted (docs/operations.md, "Redis"):

- redis-py 8 speaks RESP3 and turns maintenance notifications on ("auto") for every pool;
  while they are on, the pool skips its check for a connection the server has closed, so the
  first command after a restart went out on a dead connection and failed. Relay talks to a
  plain Redis that sends no such notifications: they are off here, and one retry on a
  connection error covers a connection that died after that check.
- With a socket timeout set, redis-py writes every command through `asyncio.wait_for`, which
  on Python 3.11 swallows a cancellation that arrives as the write completes (fixed in 3.12).
  A consumer that stops cancels its channel-layer receive; the swallowed cancellation left
  that receive polling Redis for ever and the consumer waiting on it, never closing its
  socket. Here redis-py gets no socket timeout, so it never calls `wait_for`; instead every
  layer operation runs under `asyncio.timeout`, which honours cancellation.
- redis-py's read timeout bounded single reads only. Here a whole operation (pool, connect,
  retry, command) is bounded, and a late one raises redis's TimeoutError, a RedisError, which
  callers already treat as "the channel layer is unavailable".

And one of load: redis-py's pool refuses a command at once (MaxConnectionsError, a
ConnectionError) while its 100 connections are in use. Since acks are written in batches,
every socket of a Daphne process can push at the same moment; a receive refused that way
closed every socket of the process with 4503. Here a command waits for a free connection,
within its operation's bound.
"""

from __future__ import annotations

import asyncio
import contextvars
import time

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.maint_notifications import MaintNotificationsConfig

# Connections per Redis host and process, redis-py's default for its pool.
POOL_CONNECTIONS = 100

# When the receive() running in this task began (see _brpop_with_clean).
_receive_started: contextvars.ContextVar[float] = contextvars.ContextVar("receive_started")


class BoundedRedisChannelLayer(RedisChannelLayer):
    """RedisChannelLayer whose operations each finish, or fail, within a bounded time.

    Extra CONFIG keys: `operation_timeout` (seconds one send, group operation or cleanup may
    take) and `connect_timeout` (seconds to open a connection). A blocking receive step may
    take its Redis-side wait (`brpop_timeout`, 5 s) plus `operation_timeout`.
    """

    def __init__(self, *, operation_timeout: float = 2.0, connect_timeout: float = 1.0, **config):
        super().__init__(**config)
        self.operation_timeout = operation_timeout
        self.connect_timeout = connect_timeout
        self._receive_failed_at: dict[int, float] = {}

    def create_pool(self, index):
        host = dict(self.hosts[index])  # Relay's hosts are URLs: {"address": url}
        return BlockingConnectionPool.from_url(
            host.pop("address"),
            max_connections=POOL_CONNECTIONS,
            timeout=self.operation_timeout,  # waiting for a connection is bounded too
            socket_timeout=None,  # bounded per operation below, never through wait_for
            socket_connect_timeout=self.connect_timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            maint_notifications_config=MaintNotificationsConfig(enabled=False),
            **host,
        )

    async def _bounded(self, what: str, awaitable, seconds: float):
        timeout = asyncio.timeout(seconds)
        try:
            async with timeout:
                return await awaitable
        except TimeoutError:
            if timeout.expired():
                raise RedisTimeoutError(f"channel layer {what} took over {seconds:g}s") from None
            raise

    async def send(self, channel, message):
        await self._bounded("send", super().send(channel, message), self.operation_timeout)

    async def group_add(self, group, channel):
        await self._bounded("group_add", super().group_add(group, channel), self.operation_timeout)

    async def group_discard(self, group, channel):
        await self._bounded(
            "group_discard", super().group_discard(group, channel), self.operation_timeout
        )

    async def group_send(self, group, message):
        await self._bounded(
            "group_send", super().group_send(group, message), self.operation_timeout
        )

    async def receive(self, channel):
        token = _receive_started.set(time.monotonic())
        try:
            return await super().receive(channel)
        finally:
            _receive_started.reset(token)

    # One step of receive(): a blocking pop that waits up to `timeout` inside Redis. Messages
    # stay in channels-redis's backup queue if it is cut short, so a timeout loses nothing.
    # channels-redis runs these steps for all of a process's sockets one at a time, so when
    # Redis hangs each waiting socket would take a full bound to fail, one after the other.
    # A receive that was already waiting when a step failed on its host fails at once
    # instead: its socket closes (4503) with the others, and rejoins its groups, which a
    # restarted Redis has lost, when the client reconnects.
    async def _brpop_with_clean(self, index, channel, timeout):
        started, failed = _receive_started.get(None), self._receive_failed_at.get(index)
        if started is not None and failed is not None and started <= failed:
            raise RedisConnectionError("a channel layer receive failed while this one waited")
        try:
            return await self._bounded(
                "receive",
                super()._brpop_with_clean(index, channel, timeout),
                timeout + self.operation_timeout,
            )
        except RedisError:
            self._receive_failed_at[index] = time.monotonic()
            raise

    async def _clean_receive_backup(self, index, channel):
        await self._bounded(
            "receive cleanup",
            super()._clean_receive_backup(index, channel),
            self.operation_timeout,
        )
