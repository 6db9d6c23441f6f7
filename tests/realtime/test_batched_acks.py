"""Call frames from many sockets at once are written in batches (realtime.consumers), and
every socket still gets its own ack exactly once, before its own `queued`, and nothing of
anyone else's."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from core import metrics
from realtime.models import CallRequest
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

SOCKETS = 20


def batches_written() -> tuple[float, float]:
    """(batches, frames in them) observed so far by this process's histogram."""
    samples = {s.name: s.value for s in metrics.call_submit_batch_size.collect()[0].samples}
    return samples["relay_call_submit_batch_size_count"], samples[
        "relay_call_submit_batch_size_sum"
    ]


def frame(call_id: str, to: str = "+442079460120") -> dict:
    return {"type": "call", "callId": call_id, "to": to, "message": "hi"}


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
        assert ack == {"type": "call_ack", "callId": f"call-{n}", "status": "queued"}
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
    assert await sync_to_async(CallRequest.objects.count)() == SOCKETS


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
            assert answer == {"type": "call_ack", "callId": f"call-{n}", "status": "queued"}
    stored = await sync_to_async(set)(CallRequest.objects.values_list("call_id", flat=True))
    assert stored == {f"call-{n}" for n in range(SOCKETS)} - {"call-3", "call-7"}
