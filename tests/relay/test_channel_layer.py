"""The Redis channel layer as production configures it, against a Redis of the test's own:
one task per process pops for every socket's receive, so what a socket is sent reaches that
socket only, in order, whether or not it was waiting."""

import asyncio

import pytest
from django.conf import settings

from harness.roundtrips import count_redis
from relay.platform import channel_layer
from relay.platform.channel_layer import BoundedRedisChannelLayer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def layer(redis):
    layer = BoundedRedisChannelLayer(
        hosts=[redis.url],
        prefix="test",
        capacity=3,  # what a socket may have waiting for it in this process
        channel_capacity={"specific.*": 1000},  # the process's list in Redis
        operation_timeout=settings.CHANNEL_LAYER_OPERATION_TIMEOUT,
        connect_timeout=settings.REDIS_CONNECT_TIMEOUT,
    )
    yield layer
    await layer.close_pools()


async def receive_soon(layer, channel) -> dict:
    async with asyncio.timeout(5):
        return await layer.receive(channel)


async def test_every_waiting_socket_gets_its_own_messages_through_one_pop(layer):
    channels = [await layer.new_channel() for _ in range(50)]
    receives = [asyncio.ensure_future(layer.receive(channel)) for channel in channels]
    await asyncio.sleep(0.1)
    for n, channel in reversed(list(enumerate(channels))):
        await layer.send(channel, {"type": "to", "n": n})
    async with asyncio.timeout(5):
        got = await asyncio.gather(*receives)
    assert [message["n"] for message in got] == list(range(50))
    assert layer._waiting == {} and layer._held == {}


async def test_a_group_message_reaches_each_of_its_sockets_in_this_process(layer):
    channels = [await layer.new_channel() for _ in range(3)]
    for channel in channels:
        await layer.group_add("user.1", channel)
    receives = [asyncio.ensure_future(layer.receive(channel)) for channel in channels]
    await asyncio.sleep(0.1)
    await layer.group_send("user.1", {"type": "relay.event", "n": 1})
    async with asyncio.timeout(5):
        assert [m["n"] for m in await asyncio.gather(*receives)] == [1, 1, 1]


async def test_messages_for_a_busy_socket_wait_for_it_in_order_oldest_dropped_past_capacity(
    layer,
):
    busy, idle = await layer.new_channel(), await layer.new_channel()
    waiting = asyncio.ensure_future(layer.receive(idle))  # keeps the pop running
    await asyncio.sleep(0.1)
    for n in range(5):  # capacity 3: the first two go
        await layer.send(busy, {"type": "to", "n": n})
    await layer.send(idle, {"type": "to", "n": "idle"})
    assert (await asyncio.wait_for(waiting, 5))["n"] == "idle"
    assert [(await receive_soon(layer, busy))["n"] for _ in range(3)] == [2, 3, 4]
    assert layer._held == {}


async def test_a_socket_that_stops_leaves_the_others_receiving_and_the_last_stops_the_pop(
    layer,
):
    gone, staying = await layer.new_channel(), await layer.new_channel()
    stopped = asyncio.ensure_future(layer.receive(gone))
    waiting = asyncio.ensure_future(layer.receive(staying))
    await asyncio.sleep(0.1)
    stopped.cancel()
    await asyncio.sleep(0.1)
    await layer.send(staying, {"type": "to"})
    assert (await asyncio.wait_for(waiting, 5))["type"] == "to"

    last = asyncio.ensure_future(layer.receive(staying))
    await asyncio.sleep(0.1)
    pop = layer._pump
    last.cancel()
    await asyncio.sleep(0.1)
    assert pop.done() and layer._pump is None and layer._waiting == {}
    # Nothing the stopped pop had taken is lost: the next receive gets it.
    await layer.send(staying, {"type": "after"})
    assert (await receive_soon(layer, staying))["type"] == "after"


async def test_a_burst_of_operations_past_the_pool_size_waits_for_connections(layer, monkeypatch):
    # redis-py 8's own pool refused the operations past its size (MaxConnectionsError), and
    # each refusal closed a socket with 4503. A pool of ten (made at the layer's first
    # operation): a hundred connections opened at once by a test process starved of CPU
    # under the suite's load once took past REDIS_CONNECT_TIMEOUT to connect.
    monkeypatch.setattr(channel_layer, "POOL_CONNECTIONS", 10)
    channels = [await layer.new_channel() for _ in range(3 * channel_layer.POOL_CONNECTIONS)]
    await asyncio.gather(*(layer.group_add(f"user.{n}", c) for n, c in enumerate(channels)))
    await layer.group_send("user.7", {"type": "to"})
    assert (await receive_soon(layer, channels[7]))["type"] == "to"


async def test_pushes_together_reach_their_groups_but_the_left_out_channel_in_order(layer, redis):
    other = BoundedRedisChannelLayer(hosts=[redis.url], prefix="test")  # another process's
    a, b, c = [await layer.new_channel() for _ in range(3)]
    elsewhere = await other.new_channel()
    for group, channel in (("user.1", a), ("user.1", b), ("user.2", c)):
        await layer.group_add(group, channel)
    await other.group_add("user.1", elsewhere)
    await layer.group_add("warm", await layer.new_channel())
    await layer.group_send_together([("warm", {"type": "warm"}, None)])  # the script loaded

    with count_redis() as sent:
        await layer.group_send_together(
            [
                ("user.1", {"type": "relay.event", "n": 1}, a),
                ("user.2", {"type": "relay.event", "n": 2}, None),
                ("user.1", {"type": "relay.event", "n": 3}, a),
                ("user.1", {"type": "relay.event", "n": 4}, None),
                ("user.9", {"type": "relay.event", "n": 5}, None),  # a group of no one
            ]
        )

    assert sent.round_trips == 2, sent.names  # the groups read, then one script
    assert [(await receive_soon(layer, b))["n"] for _ in range(3)] == [1, 3, 4]
    assert [(await receive_soon(other, elsewhere))["n"] for _ in range(3)] == [1, 3, 4]
    assert (await receive_soon(layer, c))["n"] == 2
    assert (await receive_soon(layer, a))["n"] == 4  # 1 and 3 left it out
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await layer.receive(a)
    await other.close_pools()


async def test_pushes_together_past_a_channels_capacity_are_dropped_not_raised(redis):
    small = BoundedRedisChannelLayer(hosts=[redis.url], prefix="cap", capacity=2)
    channel = await small.new_channel()
    await small.group_add("user.1", channel)

    await small.group_send_together([("user.1", {"type": "to", "n": n}, None) for n in range(5)])

    assert [(await receive_soon(small, channel))["n"] for _ in range(2)] == [0, 1]
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await small.receive(channel)
    await small.close_pools()


# CHANNEL_LAYER_FAST_PATHS off (its off switch, tests/platform/edges.py): channels-redis's own
# receive and group_send carry the same messages.


async def test_with_fast_paths_off_each_waiting_socket_gets_its_messages_through_channels_redis(
    layer, settings
):
    settings.CHANNEL_LAYER_FAST_PATHS = False
    channels = [await layer.new_channel() for _ in range(10)]
    receives = [asyncio.ensure_future(layer.receive(channel)) for channel in channels]
    await asyncio.sleep(0.1)
    for n, channel in reversed(list(enumerate(channels))):
        await layer.send(channel, {"type": "to", "n": n})
    async with asyncio.timeout(5):
        got = await asyncio.gather(*receives)
    assert [message["n"] for message in got] == list(range(10))
    assert layer._pump is None and layer._waiting == {}  # the shared receive never ran


async def test_with_fast_paths_off_pushes_together_reach_their_whole_groups_in_order(
    layer, settings
):
    settings.CHANNEL_LAYER_FAST_PATHS = False
    a, b, c = [await layer.new_channel() for _ in range(3)]
    for group, channel in (("user.1", a), ("user.1", b), ("user.2", c)):
        await layer.group_add(group, channel)

    await layer.group_send_together(
        [
            ("user.1", {"type": "relay.event", "n": 1, "origin": a}, a),
            ("user.2", {"type": "relay.event", "n": 2}, None),
            ("user.1", {"type": "relay.event", "n": 3}, None),
        ]
    )

    assert [(await receive_soon(layer, b))["n"] for _ in range(2)] == [1, 3]
    assert (await receive_soon(layer, c))["n"] == 2
    # The left-out channel gets it too, marked with its origin: its consumer drops it.
    assert (await receive_soon(layer, a))["origin"] == a
    assert (await receive_soon(layer, a))["n"] == 3
