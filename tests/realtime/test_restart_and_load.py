"""A web process restarted mid-stream, and load with nothing lost, on live processes."""

import asyncio
import json
import os

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import Count
from websockets.asyncio.client import connect

from accounts import services as accounts
from calls.models import Call, CallEvent
from calls.states import TERMINAL_STATES as TERMINAL
from harness.live import RelayProcess, WorkerProcess, http, wait_until
from harness.private import PrivateRedis
from tests.factories import UserFactory

SOCKETS, CALLS_PER_SOCKET = 50, 10
CALLS = SOCKETS * CALLS_PER_SOCKET

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.unmetered,
    pytest.mark.timeout(600),
]


def target(i: int) -> str:
    return f"+4420794603{i % 100:02d}"


async def send_calls(ws, ids) -> set[str]:
    """Send the calls, return the callIds acked."""
    for call_id, i in ids:
        await ws.send(
            json.dumps({"type": "call", "callId": call_id, "to": target(i), "message": "hi"})
        )
    acked: set[str] = set()
    async with asyncio.timeout(120):
        while len(acked) < len(ids):
            frame = json.loads(await ws.recv())
            if frame["type"] == "call_ack":
                acked.add(frame["callId"])
            assert frame["type"] != "error", frame
    return acked


def all_calls_listed(base: str, token: str) -> set[str]:
    status, body = http("GET", f"{base}/api/calls?limit=200", token=token, timeout=30)
    assert status == 200, body
    return {c["callId"] for c in body["calls"]}


async def test_a_web_process_restarted_mid_stream_loses_no_acked_call(login, tmp_path):
    token = login.token
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    env = {"REDIS_URL": redis.url}
    worker = await sync_to_async(WorkerProcess)(tmp_path / "worker", **env)
    first = await sync_to_async(RelayProcess)(tmp_path / "web1", "--no-worker", **env)
    try:
        ws = await connect(f"{first.ws_base}/ws?token={token}")
        acked = await send_calls(ws, [(f"a{i}", i) for i in range(20)])
        # More calls in flight when the process goes away: some may be acked, some not.
        for i in range(20, 30):
            await ws.send(
                json.dumps({"type": "call", "callId": f"a{i}", "to": target(i), "message": "hi"})
            )
        await sync_to_async(first.stop)()
        try:
            async with asyncio.timeout(10):
                while True:
                    frame = json.loads(await ws.recv())
                    if frame["type"] == "call_ack":
                        acked.add(frame["callId"])
        except Exception:  # noqa: S110 - the socket closing is the point
            pass

        second = await sync_to_async(RelayProcess)(tmp_path / "web2", "--no-worker", **env)
        try:
            async with connect(f"{second.ws_base}/ws?token={token}") as again:
                acked |= await send_calls(again, [(f"b{i}", i) for i in range(20)])
            listed = await asyncio.to_thread(all_calls_listed, second.base, token)
        finally:
            await sync_to_async(second.stop)()
    finally:
        await sync_to_async(first.stop)()
        await sync_to_async(worker.stop)()
        await sync_to_async(redis.stop)()

    assert len(acked) >= 40
    assert acked <= listed  # every acked call is there after the restart


@pytest.mark.skipif(
    connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"),
    reason="the load run is for the PostgreSQL + Redis pass",
)
async def test_five_hundred_calls_over_fifty_sockets_two_web_processes_two_workers(tmp_path):
    # 500, not issue 7's 2,000: the same property (every acked call stored once, ended once,
    # across two web processes and two workers) for a quarter of the CPU; 2,000 cost five of
    # CI's 35 minutes. The bench's ws_call_acks burst sends 2,000 (docs/decisions.md).
    users = await sync_to_async(lambda: [UserFactory(unmetered=True) for _ in range(SOCKETS)])()
    tokens = [(await sync_to_async(accounts.session_open)(user=u)).token for u in users]
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    env = {"REDIS_URL": redis.url, "SIMULATED_STEP_SECONDS": "0"}
    workers = [await sync_to_async(WorkerProcess)(tmp_path / f"w{n}", **env) for n in range(2)]
    webs = [
        await sync_to_async(RelayProcess)(tmp_path / f"web{n}", "--no-worker", **env)
        for n in range(2)
    ]
    try:
        sockets = [
            await connect(f"{webs[n % 2].ws_base}/ws?token={t}") for n, t in enumerate(tokens)
        ]
        try:
            results = await asyncio.gather(
                *(
                    send_calls(ws, [(f"u{n}-c{i}", i) for i in range(CALLS_PER_SOCKET)])
                    for n, ws in enumerate(sockets)
                )
            )
        finally:
            for ws in sockets:
                await ws.close()

        acked = sum(len(r) for r in results)

        def every_call_ended() -> bool:
            return (
                not Call.objects.exclude(status__in=TERMINAL).exists()
                and Call.objects.count() == CALLS
            )

        await sync_to_async(wait_until)(
            every_call_ended, deadline=400, what=f"{CALLS} calls to end", interval=1
        )
    finally:
        for process in webs + workers:
            await sync_to_async(process.stop)()
        await sync_to_async(redis.stop)()

    assert acked == CALLS
    stored = await sync_to_async(Call.objects.count)()
    assert stored == CALLS  # every acked call persisted, none twice (callId unique per user)
    duplicated_states = await sync_to_async(
        lambda: (
            CallEvent.objects.values("call_id", "status")
            .annotate(n=Count("id"))
            .filter(n__gt=1)
            .count()
        )
    )()
    assert duplicated_states == 0  # no step ran twice
