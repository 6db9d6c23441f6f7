"""relay_websocket_connections counts each accepted socket once, until its consumer ends,
however it ends."""

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connections

from core import events, metrics
from harness.live import HANDSHAKE_DEADLINE
from relay.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def open_now() -> float:
    return metrics.websocket_connections._value.get()


async def connected(login) -> WebsocketCommunicator:
    """A socket whose consumer has finished connecting: the accept comes before it joins its
    groups and counts itself, the pong after."""
    socket = WebsocketCommunicator(application, f"/ws?token={login.token}")
    accepted, _ = await socket.connect(timeout=HANDSHAKE_DEADLINE)
    assert accepted
    await socket.send_json_to({"type": "ping"})
    assert (await socket.receive_json_from(timeout=5))["type"] == "pong"
    return socket


async def test_a_socket_is_counted_while_open(login):
    before = open_now()
    socket = await connected(login)
    assert open_now() == before + 1

    await socket.disconnect()

    assert open_now() == before


async def test_a_consumer_that_fails_stops_counting_its_socket(login):
    """A handler that raises ends the consumer without its websocket.disconnect; the socket
    must not stay counted open for the life of the process."""
    before = open_now()
    socket = await connected(login)
    assert open_now() == before + 1

    # A message no handler takes: Channels raises inside the consumer.
    await get_channel_layer().group_send(events.user_group(login.user.pk), {"type": "no.such"})

    with pytest.raises(ValueError, match="No handler"):
        await socket.wait(timeout=5)
    assert open_now() == before
    # The crashed consumer's database connection (its authentication's, on asgiref's thread)
    # is not closed by a disconnect; closed here, it does not hold up the test database's
    # teardown on PostgreSQL.
    await sync_to_async(connections.close_all)()
