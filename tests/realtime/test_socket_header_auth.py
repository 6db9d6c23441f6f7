"""Socket auth for servers (issue 17): the API key in `X-API-Key`, or the JWT in
`Authorization`, on the upgrade request; no login session per connection; a refused socket is
logged with its reason and never with the credential."""

import logging

import pytest
from asgiref.sync import sync_to_async

from accounts import services
from accounts.models import LoginSession

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED_4401 = {"type": "websocket.close", "code": 4401}


async def ping_works(socket) -> bool:
    await socket.send_json_to({"type": "ping"})
    return (await socket.receive_json_from(timeout=2))["type"] == "pong"


async def test_the_api_key_in_a_header_opens_a_socket_without_a_login_session(communicator, user):
    key = await sync_to_async(lambda: user.api_key)()
    sessions_before = await LoginSession.objects.acount()

    for _ in range(3):
        socket, connected = await communicator(headers=[(b"x-api-key", key.encode())])
        assert connected and await ping_works(socket)

    assert await LoginSession.objects.acount() == sessions_before


async def test_a_socket_opened_with_the_api_key_gets_the_users_events(communicator, user):
    key = await sync_to_async(lambda: user.api_key)()
    socket, _ = await communicator(headers=[(b"x-api-key", key.encode())])
    await ping_works(socket)

    await socket.send_json_to(
        {"type": "call", "callId": "hdr-1", "to": "+442079460123", "message": "Hi"}
    )

    ack = await socket.receive_json_from(timeout=5)
    assert (ack["type"], ack["callId"]) == ("call_ack", "hdr-1")
    queued = await socket.receive_json_from(timeout=5)
    assert (queued["type"], queued["status"]) == ("call_status", "queued")


async def test_the_jwt_in_the_authorization_header_opens_a_socket(communicator, login):
    auth = login

    socket, connected = await communicator(
        headers=[(b"authorization", f"Bearer {auth.token}".encode())]
    )

    assert connected and await ping_works(socket)


async def test_replacing_the_api_key_closes_the_sockets_it_opened(communicator, user):
    key = await sync_to_async(lambda: user.api_key)()
    socket, _ = await communicator(headers=[(b"x-api-key", key.encode())])
    await ping_works(socket)

    await sync_to_async(services.user_api_key_regenerate)(user=user)

    assert await socket.receive_output(timeout=2) == CLOSED_4401
    again, _ = await communicator(headers=[(b"x-api-key", key.encode())])
    assert await again.receive_output(timeout=2) == CLOSED_4401


@pytest.mark.parametrize(
    "headers",
    [
        [(b"x-api-key", b"vr_not-a-key-of-anyone-at-all-0000000000")],
        [(b"x-api-key", b"")],
        [(b"authorization", b"Bearer garbage")],
        [(b"authorization", b"Basic dXNlcjpwdw==")],
        [(b"authorization", b"")],
    ],
)
async def test_a_wrong_credential_in_a_header_is_closed_with_4401(communicator, headers):
    socket, connected = await communicator(headers=headers)

    assert connected
    assert await socket.receive_output(timeout=2) == CLOSED_4401


async def test_a_wrong_jwt_header_is_not_rescued_by_a_good_api_key(communicator, user):
    key = await sync_to_async(lambda: user.api_key)()

    socket, _ = await communicator(
        headers=[(b"authorization", b"Bearer garbage"), (b"x-api-key", key.encode())]
    )

    assert await socket.receive_output(timeout=2) == CLOSED_4401


async def test_the_query_token_still_works_for_browsers(communicator, user):
    socket, connected = await communicator(user)

    assert connected and await ping_works(socket)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([], "no credentials"),
        (
            [(b"authorization", b"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl")],
            "invalid or expired token",
        ),
        ([(b"x-api-key", b"vr_secretsecretsecretsecretsecret0000")], "invalid API key"),
    ],
)
async def test_a_refused_socket_is_logged_with_its_reason_and_never_its_credential(
    communicator, caplog, headers, reason
):
    with caplog.at_level(logging.WARNING, logger="relay.security"):
        socket, _ = await communicator(headers=headers)
        assert await socket.receive_output(timeout=2) == CLOSED_4401

    refusals = [r.getMessage() for r in caplog.records if "ws refused" in r.getMessage()]
    assert len(refusals) == 1 and reason in refusals[0]
    everything = caplog.text
    for _, value in headers:
        assert value.decode().split()[-1] not in everything


async def test_a_refused_origin_is_logged(communicator, login, caplog):
    with caplog.at_level(logging.WARNING, logger="relay.security"):
        _, connected = await communicator(
            token=login.token, headers=[(b"origin", b"https://evil.example")]
        )

    assert not connected
    assert any("evil.example" in r.getMessage() for r in caplog.records)
