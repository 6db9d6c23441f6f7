"""relay_websocket_connections counts each accepted socket once, until its consumer ends,
however it ends."""

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from core import events, metrics
from relay.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def open_now() -> float:
    return metrics.websocket_connections._value.get()


async def test_a_socket_is_counted_while_open(login):
    before = open_now()
    socket = WebsocketCommunicator(application, f"/ws?token={login.token}")
    connected, _ = await socket.connect()
    assert connected
    assert open_now() == before + 1

    await socket.disconnect()

    assert open_now() == before


async def test_a_consumer_that_fails_stops_counting_its_socket(login):
    """A handler that raises ends the consumer without its websocket.disconnect; the socket
    must not stay counted open for the life of the process."""
    before = open_now()
    socket = WebsocketCommunicator(application, f"/ws?token={login.token}")
    connected, _ = await socket.connect()
    assert connected and open_now() == before + 1

    # A message no handler takes: Channels raises inside the consumer.
    await get_channel_layer().group_send(events.user_group(login.user.pk), {"type": "no.such"})

    with pytest.raises(ValueError, match="No handler"):
        await socket.wait(timeout=5)
    assert open_now() == before
