"""Hypothesis against the WebSocket consumer, through Channels' WebsocketCommunicator: whatever
frame a hostile client sends (ping, call, an unknown type, or no object at all), it gets one
answer (pong, call_ack or an error frame of the documented shape), never a close, and a ping
right after it still gets its pong. The regressions are in test_bad_frames.py."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from hypothesis import assume, given
from hypothesis import strategies as st

from accounts import services as accounts
from harness.live import HANDSHAKE_DEADLINE
from realtime.consumers import MAX_FRAME_BYTES
from relay.asgi import application
from tests.hostile import (
    FUZZ,
    assert_error_shape,
    documents,
    fill,
    garbage_document,
    hostile_json,
    hostile_text,
    json_object,
)

pytestmark = pytest.mark.django_db(transaction=True)

CALL = {
    "type": '"call"',
    "callId": '"__UNIQUE__"',
    "to": '"+442079460120"',
    "message": '"Hello"',
    "from": "null",
}


@st.composite
def unknown_frames(draw) -> str:
    kind = draw(hostile_text.filter(lambda t: t not in ("ping", "call")))
    extra = draw(st.dictionaries(hostile_text, hostile_json, max_size=2))
    return json_object({**extra, "type": json.dumps(kind)})


FRAMES = {
    "ping": documents({"type": '"ping"'}).filter(lambda t: '"type"' in t) | garbage_document,
    "call": documents(CALL),
    "unknown": unknown_frames(),
}


async def exchange(token: str, raw: str | bytes) -> tuple[dict, dict]:
    """Open a socket, send `raw` then a ping; return (the answer to raw, the answer to the
    ping). call_status frames pushed for an accepted call are skipped."""
    ws = WebsocketCommunicator(application, f"/ws?token={token}")
    connected, _ = await ws.connect(timeout=HANDSHAKE_DEADLINE)
    assert connected
    try:
        if isinstance(raw, bytes):
            await ws.send_to(bytes_data=raw)
        else:
            await ws.send_to(text_data=raw)
        await ws.send_to(text_data='{"type": "ping"}')
        answers = []
        while len(answers) < 2:
            output = await ws.receive_output(timeout=5)
            assert output["type"] == "websocket.send", f"the socket closed: {output}"
            frame = json.loads(output["text"])
            if frame["type"] != "call_status":
                answers.append(frame)
        return answers[0], answers[1]
    finally:
        await ws.disconnect()


def is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def check(answer: dict, pong: dict, kind: str) -> None:
    if answer["type"] == "error":
        assert_error_shape(answer, frame=True)
    else:
        expected = {"ping": "pong", "call": "call_ack"}.get(kind)
        assert answer["type"] == expected, answer
    assert pong["type"] == "pong", pong


@pytest.mark.parametrize("kind", list(FRAMES))
def test_no_frame_closes_the_socket_or_goes_unanswered(kind, user, settings):
    settings.RATE_LIMIT_CALLS_PER_USER = "1000000/m"
    token = accounts.session_open(user=user).token

    @FUZZ
    @given(text=FRAMES[kind], binary=st.booleans())
    def run(text, binary):
        frame = fill(text)
        data = frame.encode("utf-8", "surrogatepass")
        assume(len(data) <= MAX_FRAME_BYTES)  # larger frames are closed with 1009 by design
        # A text frame is valid UTF-8 by the protocol (Daphne closes the socket with 1007
        # otherwise), so a raw lone surrogate can only arrive as bytes, in a binary frame.
        text_frame = not binary and is_utf8(data)
        answer, pong = async_to_sync(exchange)(token, frame if text_frame else data)
        check(answer, pong, kind)

    run()
