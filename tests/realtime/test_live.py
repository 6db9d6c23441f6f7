"""End to end on real processes: Daphne, the worker, Redis (embedded or the machine's), real
WebSocket clients. These are the claims of DESIGN §5.5 that only a live system can show."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from calls.models import Call, CallEvent
from calls.states import TERMINAL_STATES as TERMINAL
from harness.live import ROOT, RelayProcess, WorkerProcess, relay_env, wait_until
from tests.factories import NumberFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.unmetered,
    pytest.mark.timeout(300),
]

CALLS, SOCKETS = 200, 4


@pytest.fixture
def relay(tmp_path):
    process = RelayProcess(tmp_path)
    yield process
    process.stop()


def target(i: int) -> str:
    return f"+4420794602{i % 100:02d}"  # last digits 0-9 cycle through every ending


async def read_until(ws, done, timeout=120):
    """Collect JSON frames until done(frames) holds."""
    frames = []
    async with asyncio.timeout(timeout):
        while not done(frames):
            frames.append(json.loads(await ws.recv()))
    return frames


def terminal_for_all(call_ids):
    def done(frames):
        ended = {
            f["callId"] for f in frames if f["type"] == "call_status" and f["status"] in TERMINAL
        }
        return call_ids <= ended

    return done


async def test_two_hundred_calls_over_four_sockets_all_acked_ended_and_seen_everywhere(
    relay, login
):
    call_ids = {f"call-{i}" for i in range(CALLS)}
    sockets = [await connect(f"{relay.ws_base}/ws?token={login.token}") for _ in range(SOCKETS)]
    try:

        async def client(n: int, ws):
            mine = [i for i in range(CALLS) if i % SOCKETS == n]
            for i in mine:
                await ws.send(
                    json.dumps(
                        {
                            "type": "call",
                            "callId": f"call-{i}",
                            "to": target(i),
                            "message": f"Message {i}",
                        }
                    )
                )
            return await read_until(ws, terminal_for_all(call_ids))

        results = await asyncio.gather(*(client(n, ws) for n, ws in enumerate(sockets)))
    finally:
        for ws in sockets:
            await ws.close()

    acks = [f for frames in results for f in frames if f["type"] == "call_ack"]
    assert sorted(f["callId"] for f in acks) == sorted(call_ids)
    assert all(f["status"] == "queued" for f in acks)
    assert not [f for frames in results for f in frames if f["type"] == "error"]

    calls = await sync_to_async(lambda: {c.call_id: c for c in Call.objects.all()})()
    assert set(calls) == call_ids
    assert all(c.status in TERMINAL for c in calls.values())
    timelines = await sync_to_async(
        lambda: {
            c.call_id: list(CallEvent.objects.filter(call=c).values_list("status", flat=True))
            for c in calls.values()
        }
    )()
    # Each socket saw each call's events in the order of their numbers, ending in its end; the
    # socket that sent a call saw every one. Another socket may have dropped a `queued` that
    # the agent's `dialing` overtook (docs/websocket.md): its numbers show the gap.
    for n, frames in enumerate(results):
        pushed: dict[str, list[tuple[int, str]]] = {}
        for f in frames:
            if f["type"] == "call_status":
                assert f["call"] == str(calls[f["callId"]].pk)
                pushed.setdefault(f["callId"], []).append((f["seq"], f["status"]))
        assert set(pushed) == call_ids
        for call_id, seen in pushed.items():
            timeline = timelines[call_id]
            assert [seq for seq, _ in seen] == sorted({seq for seq, _ in seen})
            assert [status for _, status in seen] == [timeline[seq - 1] for seq, _ in seen]
            assert seen[-1][0] == len(timeline)
            if int(call_id.removeprefix("call-")) % SOCKETS == n:
                assert [status for _, status in seen] == timeline
    for call_id, call in calls.items():
        assert timelines[call_id][-1] == call.status


async def test_an_inbound_call_recorded_from_another_shell_reaches_the_open_socket(
    relay, user, login, tmp_path
):
    number = await sync_to_async(NumberFactory)(owner=user)
    async with connect(f"{relay.ws_base}/ws?token={login.token}") as ws:
        env = relay_env(tmp_path)  # no REDIS_URL on the embedded default: found via var/
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "manage.py", "record_call", "--number", number.number]
            + ["--caller", "+447700900123", "--status", "answered", "--duration", "45"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr

        frames = await read_until(
            ws, lambda fs: any(f["type"] == "call_record" for f in fs), timeout=30
        )

    record = frames[-1]
    assert (record["caller_num"], record["status"], record["duration"]) == (
        "+447700900123",
        "answered",
        45,
    )
    assert record["number"] == number.number


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="two processes share events only through a real Redis"
)
async def test_events_cross_two_daphne_processes(relay, login, tmp_path):
    listener = await sync_to_async(RelayProcess)(tmp_path / "second", "--no-worker")
    try:
        async with (
            connect(f"{relay.ws_base}/ws?token={login.token}") as submitter,
            connect(f"{listener.ws_base}/ws?token={login.token}") as watcher,
        ):
            await submitter.send(
                json.dumps({"type": "call", "callId": "x1", "to": target(0), "message": "hi"})
            )
            frames = await read_until(watcher, terminal_for_all({"x1"}), timeout=60)
    finally:
        await sync_to_async(listener.stop)()

    assert [f["status"] for f in frames if f["type"] == "call_status"] == [
        "queued",
        "dialing",
        "ringing",
        "in_progress",
        "completed",
    ]


def test_a_worker_killed_mid_call_leaves_no_call_hanging(user, tmp_path):
    from realtime.services import call_submit

    slow = {
        "SIMULATED_STEP_SECONDS": "0.5",
        "CALL_RECOVERY_GRACE": "1",
        "CALL_RECOVERY_INTERVAL": "0.3",
    }
    calls = [
        call_submit(user=user, data={"callId": f"k{i}", "to": target(i), "message": "hi"})[0]
        for i in range(10)
    ]
    worker = WorkerProcess(tmp_path, **slow)
    try:
        wait_until(
            lambda: Call.objects.filter(status__in=["ringing", "in_progress"]).exists(),
            deadline=60,
            what="a call in progress",
        )
        worker.kill()
        assert Call.objects.exclude(status__in=TERMINAL).exists()  # killed mid-call

        worker = WorkerProcess(tmp_path, **slow)
        wait_until(
            lambda: not Call.objects.exclude(status__in=TERMINAL).exists(),
            deadline=90,
            what="every call to end",
        )
    finally:
        worker.stop()

    for call in calls:
        call.refresh_from_db()
        assert call.status in TERMINAL
        assert call.step_deadline is None


async def test_daphne_closes_an_oversized_frame_with_1009(relay, login):
    from websockets.exceptions import ConnectionClosed

    async with connect(f"{relay.ws_base}/ws?token={login.token}", max_size=None) as ws:
        await ws.send(
            json.dumps({"type": "call", "callId": "big", "to": target(0), "message": "x" * 70_000})
        )
        with pytest.raises(ConnectionClosed) as closed:
            async with asyncio.timeout(10):
                while True:
                    await ws.recv()
    assert closed.value.rcvd.code == 1009
    assert not await sync_to_async(Call.objects.exists)()
