"""The WebSocket handshake rules of DESIGN §5.5 that the accounts layer owns: a JWT of an active
session is required, and ending the session closes its sockets."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from accounts import services
from relay.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(token: str | None = None, headers=None) -> tuple[WebsocketCommunicator, bool]:
    path = "/ws" if token is None else f"/ws?token={token}"
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, _ = await communicator.connect()
    return communicator, connected


@pytest.fixture
def auth(user):
    return services.session_open(user=user)


@pytest.mark.parametrize("token", [None, "", "garbage", "eyJhbGciOiJub25lIn0.e30."])
async def test_a_socket_without_a_valid_token_is_closed_with_4401(token):
    communicator, connected = await connect(token)
    try:
        assert connected  # accepted, so that the close code reaches the client
        message = await communicator.receive_output(timeout=2)
        assert message == {"type": "websocket.close", "code": 4401}
    finally:
        await communicator.disconnect()


async def test_a_revoked_sessions_token_is_closed_with_4401(auth):
    await sync_to_async(services.session_end)(session=auth.session)

    communicator, _ = await connect(auth.token)
    try:
        assert await communicator.receive_output(timeout=2) == {
            "type": "websocket.close",
            "code": 4401,
        }
    finally:
        await communicator.disconnect()


async def test_ping_gets_pong_with_a_timestamp(auth):
    communicator, connected = await connect(auth.token)
    try:
        assert connected
        await communicator.send_json_to({"type": "ping"})
        reply = await communicator.receive_json_from(timeout=2)
        assert reply["type"] == "pong"
        assert isinstance(reply["ts"], int) and reply["ts"] > 1_600_000_000_000
    finally:
        await communicator.disconnect()


async def test_ending_the_session_closes_its_open_socket(auth):
    communicator, _ = await connect(auth.token)
    try:
        await communicator.send_json_to({"type": "ping"})
        await communicator.receive_json_from(timeout=2)

        await sync_to_async(services.session_end)(session=auth.session)

        assert await communicator.receive_output(timeout=2) == {
            "type": "websocket.close",
            "code": 4401,
        }
    finally:
        await communicator.disconnect()


async def test_a_browser_origin_outside_allowed_hosts_is_refused(auth):
    communicator, connected = await connect(
        auth.token, headers=[(b"origin", b"https://evil.example")]
    )
    try:
        assert not connected
    finally:
        await communicator.disconnect()


async def test_an_allowed_origin_is_accepted(auth):
    communicator, connected = await connect(
        auth.token, headers=[(b"origin", b"http://localhost:8000")]
    )
    try:
        assert connected
        await communicator.send_json_to({"type": "ping"})
        assert (await communicator.receive_json_from(timeout=2))["type"] == "pong"
    finally:
        await communicator.disconnect()


async def test_an_expired_token_is_closed_with_4401(auth):
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
            "user_id": str(auth.user.pk),
            "sid": str(auth.session.pk),
        },
        settings.SIMPLE_JWT["SIGNING_KEY"],
        algorithm="HS256",
    )

    communicator, _ = await connect(expired)
    try:
        assert await communicator.receive_output(timeout=2) == {
            "type": "websocket.close",
            "code": 4401,
        }
    finally:
        await communicator.disconnect()
