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

The shared receive and group_send_together read channels-redis's internals (its receive
steps, its keys; pinned to its release, tests/platform/edges.py checks each name).
CHANNEL_LAYER_FAST_PATHS=false leaves both to channels-redis's public receive and
group_send; the bounds stay.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import defaultdict, deque

from channels_redis.core import RedisChannelLayer
from channels_redis.utils import create_pool
from django.conf import settings
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.maint_notifications import MaintNotificationsConfig

logger = logging.getLogger(__name__)

# Connections per process and Redis host (redis-py's default pool size).
POOL_CONNECTIONS = 100

# group_send_together's messages, each to its channel key: expired messages dropped, then the
# message added unless the key is at capacity, as channels-redis's group_send does for one
# group. KEYS are the channel keys; ARGV the expiry, then per key its message, its capacity
# and its score (its order among the key's messages).
_PUSH_TOGETHER = """
local expiry = tonumber(ARGV[1])
local over = 0
for i = 1, #KEYS do
    local at = tonumber(ARGV[3 * i + 1])
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, at - expiry)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[3 * i]) then
        redis.call('ZADD', KEYS[i], at, ARGV[3 * i - 1])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over = over + 1
    end
end
return over
"""


def fast_paths() -> bool:
    """CHANNEL_LAYER_FAST_PATHS: one receiving task per process and pushes sent together,
    through channels-redis's internals; off, its public receive and group_send."""
    return getattr(settings, "CHANNEL_LAYER_FAST_PATHS", True)


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
        self._process_channel = f"specific.{self.client_prefix}!"
        self._receive_loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, asyncio.Future] = {}  # channel -> its socket's receive
        self._held: dict[str, deque] = {}  # channel -> messages no receive was waiting for
        self._pump: asyncio.Task | None = None

    def create_pool(self, index):
        host = dict(self.hosts[index])
        host.update(
            socket_timeout=None,  # bounded per operation below, never through wait_for
            socket_connect_timeout=self.connect_timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            maint_notifications_config=MaintNotificationsConfig(enabled=False),
        )
        if "address" not in host:
            return create_pool(host)  # a sentinel: channels-redis's own pool
        # redis-py 8's pool refuses an operation when POOL_CONNECTIONS are in use
        # (MaxConnectionsError): a burst of sockets joining their groups at once closed the
        # ones past it with 4503. Here an operation waits for a connection, within its bound.
        return BlockingConnectionPool.from_url(
            host.pop("address"),
            max_connections=POOL_CONNECTIONS,
            timeout=self.operation_timeout,
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

    async def group_send_together(self, pushes: list[tuple[str, dict, str | None]]) -> None:
        """group_send of several messages, in order, each to every channel of its group but
        the one it names (None: all), in two round trips per Redis host whatever their
        number: the groups' members read in one pipeline, then every message added by one
        script. channels-redis's group_send took four a message (expire the group, read it,
        expire the channels, an EVAL of its script's text), and a message's sender, which had
        sent it in place, got it back for nothing."""
        if not fast_paths():
            # channels-redis's group_send, push by push: each reaches its whole group, and the
            # channel it leaves out drops it by its `origin` (core.events), as on other layers.
            for group, message, _leave_out in pushes:
                await self.group_send(group, message)
            return
        await self._bounded(
            "group_send_together", self._group_send_together(pushes), self.operation_timeout
        )

    async def _group_send_together(self, pushes) -> None:
        members: dict[str, list[str]] = {}
        by_host: dict[int, list[str]] = defaultdict(list)
        for group, _message, _leave_out in pushes:
            assert self.require_valid_group_name(group), "Group name not valid"
            if group not in members:
                members[group] = []
                by_host[self.consistent_hash(group)].append(group)
        for index, groups in by_host.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for group in groups:
                key = self._group_key(group)
                pipe.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
                pipe.zrange(key, 0, -1)
            read = await pipe.execute()
            for group, channels in zip(groups, read[1::2], strict=True):
                members[group] = [channel.decode() for channel in channels]
        scripts: dict[int, tuple[list, list]] = defaultdict(lambda: ([], [self.expiry]))
        start = time.time()
        for group, message, leave_out in pushes:
            channels = [channel for channel in members[group] if channel != leave_out]
            if not channels:
                continue
            by_connection, messages, capacities = self._map_channel_keys_to_connection(
                channels, message
            )
            for index, channel_keys in by_connection.items():
                keys, args = scripts[index]
                for channel_key in channel_keys:
                    keys.append(channel_key)
                    # A score of its own per message: the socket pops the lowest first.
                    at = repr(start + len(keys) * 1e-6)
                    args += [messages[channel_key], capacities[channel_key], at]
        for index, (keys, args) in scripts.items():
            connection = self.connection(index)
            over = await connection.register_script(_PUSH_TOGETHER)(keys=keys, args=args)
            if over:
                logger.info("%s of %s pushed messages over capacity", over, len(keys))

    # A socket's receive, on its process-specific channel ("specific.<process>!<socket>"),
    # waits on one future. channels-redis gave each waiting receive its own queue and two
    # tasks (about 6 KB of objects a socket, docs/benchmarks.md, "Issue 29: sockets"), only
    # for all of them to take turns at one blocking pop on the process's shared list; here
    # one task per process pops for every socket and hands each message to its socket's
    # waiting receive. A message for a socket that is not waiting (busy with a frame, or
    # gone) is held for it, at most `capacity` per socket, the oldest dropped first, as
    # channels-redis did.
    async def receive(self, channel):
        if "!" not in channel or not fast_paths():
            return await super().receive(channel)  # a plain channel: channels-redis's own
        assert self.require_valid_channel_name(channel)
        assert self.non_local_name(channel) == self._process_channel, "Wrong client prefix"
        self._adopt_loop()
        held = self._held.get(channel)
        if held:
            message = held.popleft()
            if not held:
                del self._held[channel]
            return message
        if channel in self._waiting:
            raise RuntimeError(f"{channel} already has a receive waiting")
        waiter = self._waiting[channel] = self._receive_loop.create_future()
        if self._pump is None:
            # In a context of its own: not the first socket's (its request id, in logs).
            self._pump = self._receive_loop.create_task(
                self._pop_for_sockets(), context=contextvars.Context()
            )
        try:
            return await waiter
        finally:
            if self._waiting.get(channel) is waiter:  # cancelled, not delivered
                del self._waiting[channel]
                if not self._waiting and self._pump is not None:
                    # The last waiting socket went: nothing is lost by stopping the pop, a
                    # message it took stays in the backup queue (_brpop_with_clean).
                    self._pump.cancel()
                    self._pump = None

    def _adopt_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._receive_loop is loop:
            return
        if self._pump is not None and not self._receive_loop.is_closed():
            raise RuntimeError("Two event loops are trying to receive() on one channel layer")
        # A loop that is gone (one per test) took its sockets with it.
        self._receive_loop, self._pump = loop, None
        self._waiting.clear()
        self._held.clear()

    async def _pop_for_sockets(self) -> None:
        """The process's one receiving task: pops while any socket waits; a failed pop fails
        every waiting receive at once (each socket closes with 4503), and the next receive
        starts popping again."""
        try:
            while self._waiting:
                to, message = await self.receive_single(self._process_channel)
                for channel in to if isinstance(to, list) else (to,):
                    waiter = self._waiting.pop(channel, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(message)
                    else:
                        self._held.setdefault(channel, deque(maxlen=self.capacity)).append(message)
        except Exception as exc:  # noqa: BLE001 - handed to every waiting receive
            waiting = list(self._waiting.values())
            self._waiting.clear()
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_exception(exc)
        finally:
            if self._pump is asyncio.current_task():
                self._pump = None

    # One step of the pop: a blocking pop that waits up to `timeout` inside Redis. Messages
    # stay in channels-redis's backup queue if it is cut short, so a timeout loses nothing.
    async def _brpop_with_clean(self, index, channel, timeout):
        return await self._bounded(
            "receive",
            super()._brpop_with_clean(index, channel, timeout),
            timeout + self.operation_timeout,
        )

    async def _clean_receive_backup(self, index, channel):
        await self._bounded(
            "receive cleanup",
            super()._clean_receive_backup(index, channel),
            self.operation_timeout,
        )
