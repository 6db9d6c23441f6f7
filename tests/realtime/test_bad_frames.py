"""Bad frames that used to close the socket with 1011 (issue 12): each gets an error frame now,
and the socket stays open. Frames are JSON text written by hand, as a hostile client sends."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from accounts import services as accounts
from calls.models import Call
from core.parsing import MAX_JSON_DEPTH
from harness.live import HANDSHAKE_DEADLINE
from realtime.consumers import CLOSE_NOT_FOUND
from relay.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def auth(user):
    return accounts.session_open(user=user)


@pytest.fixture
async def ws(auth):
    communicator = WebsocketCommunicator(application, f"/ws?token={auth.token}")
    connected, _ = await communicator.connect(timeout=HANDSHAKE_DEADLINE)
    assert connected
    yield communicator
    await communicator.disconnect()


def call_text(call_id: str = "c1", message: str = "Hello") -> str:
    return (
        f'{{"type": "call", "callId": "{call_id}", "to": "+442079460120", "message": "{message}"}}'
    )


async def error_then_pong(ws, raw: str) -> dict:
    """Send `raw`; return the error frame it gets, after proving the socket still answers."""
    await ws.send_to(text_data=raw)
    error = await ws.receive_json_from(timeout=5)
    assert error["type"] == "error", error
    assert error["code"] == "invalid_request"
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"
    return error


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (call_text(call_id=r"c\ud800"), "callId"),
        (call_text(message=r"x\udfffy"), "message"),
        (call_text(call_id=r"c\u0000"), "callId"),
        (call_text(message=r"x\u0000y"), "message"),
        (r'{"type": "ping\u0000"}', "type"),
    ],
)
async def test_a_nul_or_lone_surrogate_gets_an_error_naming_the_field(ws, raw, field):
    error = await error_then_pong(ws, raw)

    assert list(error["fields"]) == [field]
    assert not await sync_to_async(Call.objects.exists)()


async def test_a_clean_call_id_is_echoed_when_another_field_is_refused(ws):
    error = await error_then_pong(ws, call_text(call_id="order-7", message=r"x\u0000"))

    assert error["callId"] == "order-7"


async def test_a_bad_call_id_is_not_echoed(ws):
    error = await error_then_pong(ws, call_text(call_id=r"c\ud800"))

    assert "callId" not in error


async def test_deeply_nested_json_gets_an_error(ws):
    error = await error_then_pong(ws, "[" * 30_000 + "]" * 30_000)

    assert f"deeper than {MAX_JSON_DEPTH} levels" in error["error"]


async def test_a_five_thousand_digit_integer_is_reported_as_too_large(ws):
    error = await error_then_pong(ws, '{"type": "ping", "n": ' + "9" * 5000 + "}")

    assert error["error"] == "A number in the frame is too large (more than 100 digits)."


async def test_a_binary_frame_that_is_not_utf8_gets_an_error(ws):
    await ws.send_to(bytes_data=b'{"type": "ping", "x": "\xff"}')

    error = await ws.receive_json_from(timeout=5)

    assert (error["type"], error["code"]) == ("error", "invalid_request")


@pytest.mark.parametrize("path", ["/wsx", "/ws/", "/", "/api/ws?token=x"])
async def test_a_handshake_to_an_unknown_path_is_accepted_and_closed_with_4404(path):
    communicator = WebsocketCommunicator(application, path)

    connected, code = await communicator.connect(timeout=HANDSHAKE_DEADLINE)

    assert connected
    assert await communicator.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CLOSE_NOT_FOUND,
    }
    await communicator.disconnect()
