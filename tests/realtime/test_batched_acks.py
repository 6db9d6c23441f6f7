"""Call frames from many sockets at once are written in batches (realtime.consumers), and
every socket still gets its own ack exactly once, before its own `queued`, and nothing of
anyone else's."""

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from core import metrics
from realtime import consumers
from tests.factories import UserFactory
from tests.ledger import aack

pytestmark = pytest.mark.django_db(transaction=True)

SOCKETS = 20


def batches_written() -> tuple[float, float]:
    """(batches, frames in them) observed so far by this process's histogram."""
    samples = {s.name: s.value for s in metrics.call_submit_batch_size.collect()[0].samples}
    return samples["relay_call_submit_batch_size_count"], samples[
        "relay_call_submit_batch_size_sum"
    ]


def frame(call_id: str, to: str | None = None) -> dict:
    return {"type": "call", "callId": call_id, "to": to or "+442079460120", "message": "hi"}


@pytest.fixture
async def sockets(communicator):
    """SOCKETS connected sockets, each of a user of its own."""
    users = [await sync_to_async(UserFactory)(unmetered=True) for _ in range(SOCKETS)]
    opened = []
    for user in users:
        socket, connected = await communicator(user)
        assert connected
        opened.append(socket)
    return opened


async def test_frames_sent_together_are_acked_once_each_and_share_batches(sockets):
    before = batches_written()

    for n, socket in enumerate(sockets):  # all sent before any is read
        await socket.send_json_to(frame(f"call-{n}"))
    heard = [[await socket.receive_json_from(timeout=10) for _ in range(2)] for socket in sockets]

    for n, (ack, queued) in enumerate(heard):
        assert ack == await aack(f"call-{n}", "queued")
        assert (queued["type"], queued["callId"], queued["status"]) == (
            "call_status",
            f"call-{n}",
            "queued",
        )
    assert all([await socket.receive_nothing(timeout=0.2) for socket in sockets])
    (batches_then, frames_then), (batches_now, frames_now) = before, batches_written()
    batches, frames = batches_now - batches_then, frames_now - frames_then
    assert frames == SOCKETS
    assert batches < SOCKETS  # some frames shared a transaction
    assert await sync_to_async(Call.objects.count)() == SOCKETS


async def test_a_refused_frame_in_a_batch_gets_its_error_and_the_others_their_acks(sockets):
    refused = {3: "not a number", 7: "+449098790000"}  # invalid; premium rate
    for n, socket in enumerate(sockets):
        await socket.send_json_to(frame(f"call-{n}", to=refused.get(n, "+442079460120")))
    answers = await asyncio.gather(*(s.receive_json_from(timeout=10) for s in sockets))

    for n, answer in enumerate(answers):
        if n == 7:
            assert (answer["type"], answer["code"]) == ("error", "destination_not_allowed")
            assert answer["callId"] == "call-7"
        elif n == 3:
            assert (answer["type"], answer["code"]) == ("error", "invalid_request")
        else:
            assert answer == await aack(f"call-{n}", "queued")
    stored = await sync_to_async(set)(Call.objects.values_list("call_id", flat=True))
    assert stored == {f"call-{n}" for n in range(SOCKETS)} - {"call-3", "call-7"}


class HeldWriter:
    """The process's submit writer (realtime.consumers._submit_batch, the real one) held at
    its first batch until released, with the size of every batch it wrote."""

    def __init__(self, monkeypatch):
        self.entered, self.released = threading.Event(), threading.Event()
        self.sizes: list[int] = []
        write = consumers._submit_batch

        def held(submits):
            self.entered.set()
            assert self.released.wait(10), "the test never released the writer"
            self.sizes.append(len(submits))
            return write(submits)

        monkeypatch.setattr(consumers, "_submit_batch", held)

    async def writing(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 10), "no batch reached the writer"

    def release(self) -> None:
        self.released.set()


async def waiting_in_batcher(count: int) -> None:
    """Until `count` frames wait for the writer (a deadline, not a sleep)."""
    deadline = time.monotonic() + 10
    while len(consumers._batcher().waiting) < count:
        assert time.monotonic() < deadline, f"{len(consumers._batcher().waiting)} waiting"
        await asyncio.sleep(0.01)


@pytest.fixture
def held_writer(monkeypatch):
    writer = HeldWriter(monkeypatch)
    yield writer
    writer.release()


async def test_one_sockets_frames_back_to_back_share_a_batch_and_are_answered_in_order(
    communicator, held_writer
):
    user = await sync_to_async(UserFactory)(unmetered=True)
    socket, _ = await communicator(user)
    await socket.send_json_to(frame("call-0"))
    await held_writer.writing()  # call-0 is being written, alone
    for n in range(1, 6):
        await socket.send_json_to(frame(f"call-{n}", to="not a number" if n == 3 else None))
    await socket.send_json_to({"type": "ping"})
    await waiting_in_batcher(5)  # read while call-0 was written: every call frame
    held_writer.release()

    heard = [await socket.receive_json_from(timeout=10) for _ in range(12)]

    expected = []
    for n in range(6):
        if n == 3:
            expected.append(("error", "call-3", "invalid_request"))
        else:
            expected += [
                ("call_ack", f"call-{n}", "queued"),
                ("call_status", f"call-{n}", "queued"),
            ]
    said = [(h["type"], h.get("callId"), h.get("status", h.get("code"))) for h in heard[:11]]
    assert said == expected
    assert heard[11]["type"] == "pong"  # after the call frames sent before it
    assert held_writer.sizes == [1, 5]
    stored = await sync_to_async(set)(Call.objects.values_list("call_id", flat=True))
    assert stored == {"call-0", "call-1", "call-2", "call-4", "call-5"}


async def test_a_socket_has_at_most_calls_in_flight_max_frames_read(
    communicator, held_writer, monkeypatch
):
    monkeypatch.setattr(consumers, "CALLS_IN_FLIGHT_MAX", 3)
    user = await sync_to_async(UserFactory)(unmetered=True)
    socket, _ = await communicator(user)
    await socket.send_json_to(frame("call-0"))
    await held_writer.writing()
    for n in range(1, 8):
        await socket.send_json_to(frame(f"call-{n}"))
    await waiting_in_batcher(2)
    # call-0, -1 and -2 are in flight: the socket reads no further until call-0 is answered.
    assert await socket.receive_nothing(timeout=0.3)
    assert len(consumers._batcher().waiting) == 2
    held_writer.release()

    acks = [await socket.receive_json_from(timeout=10) for _ in range(16)]

    assert [a["callId"] for a in acks if a["type"] == "call_ack"] == [f"call-{n}" for n in range(8)]
    assert held_writer.sizes[:2] == [1, 2]
    assert sum(held_writer.sizes) == 8


async def test_a_socket_closed_with_frames_in_flight_still_commits_them_once(
    communicator, held_writer
):
    user = await sync_to_async(UserFactory)(unmetered=True)
    socket, _ = await communicator(user)
    await socket.send_json_to(frame("call-0"))
    await held_writer.writing()
    await socket.send_json_to(frame("call-1"))
    await waiting_in_batcher(1)
    await socket.disconnect()
    held_writer.release()

    deadline = time.monotonic() + 10
    while await sync_to_async(Call.objects.count)() < 2:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    while consumers._answering:  # the answers to a closed socket end without an error
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    stored = await sync_to_async(list)(Call.objects.values_list("call_id", flat=True))
    assert sorted(stored) == ["call-0", "call-1"]
