"""A socket sends a call's `call_status` frames in the order of their numbers (`seq`,
realtime.sequence): a frame that reaches it after a newer one of the same call is dropped,
counted in /metrics and never logged; the numbers on the wire are the ledger's, from 1 with no
gap, and `GET /api/calls/:callId` gives every one of them for catching up."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from calls.models import Call
from core import events, metrics
from realtime.sequence import CallFrames, SentSeqs
from tests.conftest import drain_tasks, jwt_client

pytestmark = pytest.mark.timeout(30)


def frame(call: str, seq: int, status: str = "dialing", call_id: str = "c") -> dict:
    return {"type": "call_status", "callId": call_id, "call": call, "seq": seq, "status": status}


def dropped() -> float:
    return metrics.call_status_dropped._value.get()


def test_a_frame_goes_only_above_the_last_number_sent_of_its_call():
    seqs, before = SentSeqs(), dropped()

    taken = [seqs.take(frame(c, n)) for c, n in [("a", 2), ("a", 1), ("b", 1), ("a", 2), ("a", 5)]]

    assert taken == [True, False, True, False, True]
    assert dropped() == before + 2


def test_the_socket_forgets_the_oldest_calls_past_its_memory():
    seqs = SentSeqs(remembered=2)
    for call in ("a", "b", "c"):
        seqs.take(frame(call, 3))

    assert list(seqs.last) == ["b", "c"]
    assert seqs.take(frame("a", 1))  # forgotten: nothing to compare with


def test_the_senders_own_call_waits_for_its_ack_then_every_frame_goes_in_order():
    """The agent's `dialing` reaches the socket that sent the call before its ack is sent:
    held, it follows the ack's `queued` rather than passing it and dropping it."""
    frames = CallFrames()
    frames.owe("c1")
    early = [
        frames.arrived(frame("x", 2, "dialing", "c1")),
        frames.arrived(frame("y", 1, "queued", "c2")),
    ]

    in_place = frames.in_place(frame("x", 1, "queued", "c1"))  # with the ack
    then = frames.answered("c1")

    assert early == [[], [frame("y", 1, "queued", "c2")]]  # another call is not held up
    assert in_place == [frame("x", 1, "queued", "c1")]
    assert then == [frame("x", 2, "dialing", "c1")]
    assert frames.arrived(frame("x", 3, "ringing", "c1")) == [frame("x", 3, "ringing", "c1")]
    assert frames.owed == {} and frames.held == {}


def test_a_call_frame_sent_twice_holds_until_both_are_answered_and_a_refusal_releases_too():
    frames = CallFrames()
    frames.owe("c1")
    frames.owe("c1")
    frames.owe(7)  # a callId that is no string: refused, nothing to hold for

    assert frames.arrived(frame("x", 2, "dialing", "c1")) == []
    assert frames.answered("c1") == [frame("x", 2, "dialing", "c1")]
    assert frames.arrived(frame("x", 3, "ringing", "c1")) == []  # the repeat's ack still owed
    assert frames.answered("c1") == [frame("x", 3, "ringing", "c1")]
    assert frames.answered(7) == [] and frames.answered("never") == []
    assert frames.owed == {} and frames.held == {}


@pytest.mark.django_db(transaction=True)
async def test_a_late_older_frame_is_dropped_without_a_log_line(communicator, user, caplog):
    ws, connected = await communicator(user)
    assert connected
    group, before = events.user_group(user.pk), dropped()

    with caplog.at_level(logging.DEBUG):
        for seq, status in [(2, "dialing"), (1, "queued"), (3, "ringing"), (3, "ringing")]:
            message = {"type": "relay.event", "event": frame("x", seq, status)}
            await get_channel_layer().group_send(group, message)
        got = [await ws.receive_json_from(timeout=5) for _ in range(2)]
        assert await ws.receive_nothing(timeout=0.3)

    assert [(f["seq"], f["status"]) for f in got] == [(2, "dialing"), (3, "ringing")]
    assert dropped() == before + 2
    assert not [r for r in caplog.records if "queued" in r.getMessage()]


@pytest.mark.django_db(transaction=True)
async def test_a_calls_numbers_run_from_one_with_no_gap_and_the_detail_has_them_all(
    communicator, login
):
    ws, connected = await communicator(token=login.token)
    assert connected
    await ws.send_json_to(
        {"type": "call", "callId": "c1", "to": "+442079460120", "message": "Hello there"}
    )
    ack = await ws.receive_json_from(timeout=5)
    await sync_to_async(drain_tasks)()
    frames = []
    while not frames or frames[-1]["status"] != "completed":
        frames.append(await ws.receive_json_from(timeout=5))

    call = await sync_to_async(Call.objects.get)(call_id="c1")
    detail = await sync_to_async(jwt_client(login.token).get)("/api/calls/c1")
    timeline = detail.json()["timeline"]
    assert ack["call"] == detail.json()["call"] == str(call.pk)
    assert {f["call"] for f in frames} == {str(call.pk)}
    assert (
        [f["seq"] for f in frames]
        == list(range(1, len(frames) + 1))
        == [row["seq"] for row in timeline]
    )
    assert [f["status"] for f in frames] == [row["status"] for row in timeline]
    assert call.last_seq == len(frames)
