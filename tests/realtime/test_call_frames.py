"""The WebSocket `call` protocol of DESIGN §5.5, through Channels' WebsocketCommunicator."""

import json

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from history.services import record_inbound_call
from tests.conftest import drain_tasks, jwt_client
from tests.factories import NumberFactory
from tests.ledger import aack

pytestmark = pytest.mark.django_db(transaction=True)

TERMINAL = {"completed", "busy", "no_answer", "failed", "canceled"}


@pytest.fixture
async def ws(communicator, login):
    """A connected socket of `user`, on the session `login` (which other tests reuse)."""
    socket, connected = await communicator(token=login.token)
    assert connected
    return socket


async def frames_until(ws, predicate, timeout=5):
    """Read frames until one satisfies `predicate`; return them all."""
    seen = []
    while True:
        frame = await ws.receive_json_from(timeout=timeout)
        seen.append(frame)
        if predicate(frame):
            return seen


async def submit_and_run(ws, frame):
    """Send a call, wait for its ack (so it is committed), run the worker, and return every
    frame up to the call's terminal status."""
    await ws.send_json_to(frame)
    frames = await frames_until(ws, lambda f: f["type"] == "call_ack")
    await sync_to_async(drain_tasks)()
    if not any(f.get("status") in TERMINAL for f in frames):
        frames += await frames_until(ws, lambda f: f.get("status") in TERMINAL)
    return frames


def call_frame(call_id="c1", to="+442079460120", message="Hello from Relay", **extra):
    return {"type": "call", "callId": call_id, "to": to, "message": message, **extra}


async def test_a_call_is_acked_as_queued_after_it_is_committed(ws):
    await ws.send_json_to(call_frame())

    frames = await frames_until(ws, lambda f: f["type"] == "call_ack")

    assert frames[-1] == await aack("c1", "queued")
    assert await sync_to_async(Call.objects.filter(call_id="c1", status="queued").exists)()


async def test_the_ack_comes_before_the_queued_status_on_the_submitting_socket(ws):
    await ws.send_json_to(call_frame())

    first = await ws.receive_json_from(timeout=5)
    second = await ws.receive_json_from(timeout=5)

    assert first == await aack("c1", "queued")
    assert (second["type"], second["callId"], second["status"]) == ("call_status", "c1", "queued")


async def test_the_queued_status_reaches_the_users_other_socket_and_this_one_once(
    ws, communicator, login
):
    """The submitting socket hears `queued` straight after its ack, not again from the
    group; another socket of the same user hears it from the group."""
    other, connected = await communicator(token=login.token)
    assert connected
    try:
        await ws.send_json_to(call_frame())
        here = [await ws.receive_json_from(timeout=5) for _ in range(2)]
        there = await other.receive_json_from(timeout=5)
        assert await ws.receive_nothing(timeout=0.3)
    finally:
        await other.disconnect()

    assert [f["type"] for f in here] == ["call_ack", "call_status"]
    assert (there["type"], there["callId"], there["status"]) == ("call_status", "c1", "queued")


async def test_a_duplicate_call_id_acks_the_existing_call_with_its_status(ws):
    await submit_and_run(ws, call_frame())

    await ws.send_json_to(call_frame(to="+442079460127", message="another body"))
    ack = (await frames_until(ws, lambda f: f["type"] == "call_ack"))[-1]

    assert ack == await aack("c1", "completed")
    assert await sync_to_async(Call.objects.count)() == 1


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        (call_frame(to="07700900123"), "to"),
        (call_frame(to="+4420"), "to"),
        (call_frame(message=""), "message"),
        (call_frame(message="x" * 1001), "message"),
        ({"type": "call", "to": "+442079460120", "message": "hi"}, "callId"),
        (call_frame(call_id=7), "callId"),
    ],
)
async def test_each_bad_call_gets_an_error_frame_and_the_socket_stays_open(ws, frame, field):
    await ws.send_json_to(frame)

    error = await ws.receive_json_from(timeout=5)

    assert error["type"] == "error"
    assert error["code"] == "invalid_request"
    assert field in error["fields"]
    if isinstance(frame.get("callId"), str):
        assert error["callId"] == frame["callId"]
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"
    assert not await sync_to_async(Call.objects.exists)()


@pytest.mark.parametrize(
    "frame",
    [
        call_frame(to=None, message="   "),
        call_frame(call_id="x" * 65, to=442079460120),
        call_frame(call_id="bad\tid", message=None),
        {"type": "call", "callId": "c9", "to": "+442079460120", "message": "hi", "from": 7},
        {"type": "call", "callId": "c9", "to": "+442079460120", "message": "hi", "from": "+1"},
        {"type": "call"},
        call_frame(language="klingon"),
        call_frame(language=["en"]),
    ],
)
async def test_a_bad_call_frame_and_the_same_post_answer_the_same_error(ws, login, frame):
    # One validator for both ways in: the frame's error is the HTTP body plus type and callId.
    body = {key: value for key, value in frame.items() if key != "type"}
    client = jwt_client(login.token)
    response = await sync_to_async(client.post)("/api/calls", body, format="json")

    await ws.send_json_to(frame)
    error = await ws.receive_json_from(timeout=5)

    assert response.status_code == 400
    expected = {"type": "error", **response.json()}
    if isinstance(frame.get("callId"), str):
        expected["callId"] = frame["callId"]
    assert error == expected
    assert not await sync_to_async(Call.objects.exists)()


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"ping"', '{"no_type": 1}', '{"type": 5}'])
async def test_frames_that_are_not_json_objects_with_a_type_are_errors(ws, raw):
    await ws.send_to(text_data=raw)

    error = await ws.receive_json_from(timeout=5)

    assert (error["type"], error["code"]) == ("error", "invalid_request")
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"


async def test_an_unknown_type_is_an_error(ws):
    await ws.send_json_to({"type": "dance"})

    error = await ws.receive_json_from(timeout=5)

    assert error["type"] == "error" and "dance" in error["error"]


async def test_an_oversized_frame_closes_the_socket_with_1009(ws):
    await ws.send_to(text_data=json.dumps(call_frame(message="x" * (64 * 1024))))

    assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 1009}


async def test_calls_are_rate_limited_per_user(ws, settings):
    settings.RATE_LIMIT_CALLS_PER_USER = "2/m"
    for i in range(2):
        await ws.send_json_to(call_frame(call_id=f"c{i}"))
        await frames_until(ws, lambda f: f["type"] == "call_ack")

    await ws.send_json_to(call_frame(call_id="c9"))
    error = (await frames_until(ws, lambda f: f["type"] == "error"))[-1]

    assert error["code"] == "rate_limited"
    assert error["callId"] == "c9"


@pytest.mark.parametrize(
    ("to", "sequence"),
    [
        ("+442079460120", ["queued", "dialing", "ringing", "in_progress", "completed"]),
        ("+442079460127", ["queued", "dialing", "ringing", "busy"]),
        ("+442079460128", ["queued", "dialing", "ringing", "no_answer"]),
        ("+442079460129", ["queued", "dialing", "ringing", "failed"]),
    ],
)
async def test_call_status_frames_follow_each_simulated_ending(ws, to, sequence):
    frames = await submit_and_run(ws, call_frame(to=to))

    statuses = [f["status"] for f in frames if f["type"] == "call_status"]
    assert statuses == sequence
    assert [f for f in frames if f["type"] == "call_ack"] == [await aack("c1", "queued")]
    last = frames[-1]
    assert last["callId"] == "c1" and isinstance(last["ts"], int)
    if last["status"] == "completed":
        assert last["duration"] == 2  # three words at 150 a minute
    if last["status"] == "failed":
        assert last["reason"] == "unreachable"


async def test_every_socket_of_the_user_sees_the_call(communicator, login, ws):
    other, _ = await communicator(token=login.token)

    await submit_and_run(ws, call_frame())

    frames = await frames_until(other, lambda f: f.get("status") in TERMINAL)
    assert [f["status"] for f in frames] == [
        "queued",
        "dialing",
        "ringing",
        "in_progress",
        "completed",
    ]


async def test_another_users_socket_sees_nothing(communicator, ws, other_user):
    outsider, _ = await communicator(other_user)

    await submit_and_run(ws, call_frame())

    assert await outsider.receive_nothing(timeout=0.2)


async def test_a_recorded_inbound_call_is_pushed_as_call_record(ws, user):
    number = await sync_to_async(NumberFactory)(owner=user, alias="Office")

    record = await sync_to_async(record_inbound_call)(
        number=number,
        caller_num="+447700900123",
        status="answered",
        duration=45,
        answered_by="forward",
        forwarded_to="+447400123456",
    )

    frame = await ws.receive_json_from(timeout=5)
    assert frame == {
        "type": "call_record",
        "id": str(record.id),
        "number_id": str(number.pk),
        "caller_num": "+447700900123",
        "status": "answered",
        "duration": 45,
        "created_at": int(record.created_at.timestamp() * 1000),
        "number": number.number,
        "alias": "Office",
        "recording_url": None,
        "recording_seconds": None,
        "heard": False,
        "answered_by": "forward",
        "forwarded_to": "+447400123456",
        "ring_entry": None,  # recorded by hand, not by a ring list
        "transferred_to": None,  # nobody handed it on (issue 58)
        "answered_member_id": None,
        "answered_member_email": None,
        "transcript": "",
        "transcript_confidence": None,
        "transcript_status": None,
        "call": str(record.id),  # the record is its call's end: ringing 1, answered 2, end 3
        "seq": 3,
    }


async def test_an_inbound_call_that_rings_is_pushed_with_its_call_and_seq(ws, user):
    from telephony.services import inbound_call_open

    number = await sync_to_async(NumberFactory)(owner=user)

    call = await sync_to_async(inbound_call_open)(
        sip_call_id="in-1@test", number=number, caller_num="+447700900123", ringing=True
    )

    frame = await ws.receive_json_from(timeout=5)
    assert frame == {
        "type": "incoming_call",
        "call": str(call.pk),
        "seq": 1,
        "number_id": str(number.pk),
        "number": number.number,
        "caller_num": "+447700900123",
        "ts": int(call.created_at.timestamp() * 1000),
    }
