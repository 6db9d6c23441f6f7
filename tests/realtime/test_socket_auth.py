"""The WebSocket handshake rules of DESIGN §5.5 that the accounts layer owns: a JWT of an active
session is required, and ending the session closes its sockets."""

import pytest
from asgiref.sync import sync_to_async

from accounts import services

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("token", [None, "", "garbage", "eyJhbGciOiJub25lIn0.e30."])
async def test_a_socket_without_a_valid_token_is_closed_with_4401(communicator, token):
    socket, connected = await communicator(token=token)

    assert connected  # accepted, so that the close code reaches the client
    message = await socket.receive_output(timeout=2)
    assert message == {"type": "websocket.close", "code": 4401}


async def test_a_revoked_sessions_token_is_closed_with_4401(communicator, login):
    await sync_to_async(services.session_end)(session=login.session)

    socket, _ = await communicator(token=login.token)

    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4401,
    }


async def test_ping_gets_pong_with_a_timestamp(communicator, login):
    socket, connected = await communicator(token=login.token)

    assert connected
    await socket.send_json_to({"type": "ping"})
    reply = await socket.receive_json_from(timeout=2)
    assert reply["type"] == "pong"
    assert isinstance(reply["ts"], int) and reply["ts"] > 1_600_000_000_000


async def test_ending_the_session_closes_its_open_socket(communicator, login):
    socket, _ = await communicator(token=login.token)
    await socket.send_json_to({"type": "ping"})
    await socket.receive_json_from(timeout=2)

    await sync_to_async(services.session_end)(session=login.session)

    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4401,
    }


async def test_a_session_ended_between_authentication_and_joining_still_closes_the_socket(login):
    # The middleware's authentication, then the logout, then the consumer joins its groups:
    # the logout's close went to a group the socket was not yet in.
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from realtime.middleware import SocketAuthMiddleware
    from realtime.routing import websocket_urlpatterns

    router = URLRouter(websocket_urlpatterns)

    async def logout_in_between(scope, receive, send):
        await sync_to_async(services.session_end)(session=login.session)
        return await router(scope, receive, send)

    socket = WebsocketCommunicator(
        SocketAuthMiddleware(logout_in_between), f"/ws?token={login.token}"
    )
    connected, _ = await socket.connect(timeout=5)

    assert connected
    assert await socket.receive_output(timeout=2) == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()


async def test_a_browser_origin_outside_allowed_hosts_is_refused(communicator, login):
    _, connected = await communicator(
        token=login.token, headers=[(b"origin", b"https://evil.example")]
    )

    assert not connected


async def test_an_allowed_origin_is_accepted(communicator, login):
    socket, connected = await communicator(
        token=login.token, headers=[(b"origin", b"http://localhost:8000")]
    )

    assert connected
    await socket.send_json_to({"type": "ping"})
    assert (await socket.receive_json_from(timeout=2))["type"] == "pong"


async def test_an_expired_token_is_closed_with_4401(communicator, login):
    import time

    import jwt as pyjwt
    from django.conf import settings

    now = int(time.time())
    expired = pyjwt.encode(
        {
            "token_type": "access",
            "exp": now - 1,
            "iat": now - 3600,
            "jti": "x",
            "user_id": str(login.user.pk),
            "sid": str(login.session.pk),
        },
        settings.SIMPLE_JWT["SIGNING_KEY"],
        algorithm="HS256",
    )

    socket, _ = await communicator(token=expired)

    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4401,
    }
