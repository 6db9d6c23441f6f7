import asyncio
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from accounts import services as accounts
from harness.live import RelayProcess
from harness.private import PrivateRedis


@pytest.mark.django_db
def test_healthz_reports_every_part_ok(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "channelLayer": "ok"}


@pytest.mark.django_db
def test_healthz_names_an_unreachable_channel_layer(client, settings):
    # A real Redis client against a port where nothing listens: a genuine connection failure.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "relay.platform.channel_layer.BoundedRedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        response = client.get("/healthz")
    finally:
        channel_layers.backends.clear()

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "database": "ok",
        "channelLayer": "unavailable",
    }


def healthz_status(base: str) -> int:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=15) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
async def test_healthz_is_ok_while_sockets_are_open_and_idle(user, tmp_path):
    # channels-redis pops for every process-local channel of a prefix in one receive at a
    # time; a check under its own prefix waited behind an idle socket's receive and said 503.
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    relay = await sync_to_async(RelayProcess)(tmp_path / "relay", REDIS_URL=redis.url)
    token = (await sync_to_async(accounts.session_open)(user=user)).token
    try:
        sockets = [await connect(f"{relay.ws_base}/ws?token={token}") for _ in range(2)]
        for ws in sockets:  # each consumer is up and waiting on the channel layer
            await ws.send(json.dumps({"type": "ping"}))
            assert json.loads(await ws.recv())["type"] == "pong"

        statuses = [await asyncio.to_thread(healthz_status, relay.base) for _ in range(3)]

        assert statuses == [200, 200, 200]
        for ws in sockets:
            await ws.close()
    finally:
        await sync_to_async(relay.stop)()
        await sync_to_async(redis.stop)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_healthz_is_ok_for_checks_that_arrive_together(tmp_path):
    """gunicorn runs each request's check on an event loop of its own thread: two at once
    both receiving on the process's socket channels said "Two event loops are trying to
    receive() on one channel layer" and 503, while everything was up."""
    relay = RelayProcess(tmp_path, "--no-worker")
    try:
        for base in (relay.base, f"http://127.0.0.1:{relay.ws_port}"):
            with ThreadPoolExecutor(max_workers=8) as pool:
                statuses = list(pool.map(healthz_status, [base] * 32))
            assert statuses == [200] * 32, base
    finally:
        relay.stop()
