"""Faults on a live system: what a client sees while a dependency is down, and that nothing
acked is lost. Each test owns the dependency it breaks."""

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from accounts import services as accounts
from calls.models import Call
from calls.states import TERMINAL_STATES as TERMINAL
from harness.live import RelayProcess, eventually, http, wait_until
from harness.private import PrivateRedis

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.unmetered,
    pytest.mark.timeout(300),
]


async def submit(ws, call_id: str) -> dict:
    await ws.send(
        json.dumps({"type": "call", "callId": call_id, "to": "+442079460120", "message": "hi"})
    )
    async with asyncio.timeout(60):
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == "call_ack" and frame["callId"] == call_id:
                return frame


async def reconnect_and_submit(relay, token: str, call_id: str, attempts: int = 10) -> dict:
    for attempt in range(attempts):
        try:
            async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
                return await submit(ws, call_id)
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 4503, closed
            await asyncio.sleep(0.2 * (attempt + 1))  # the client's backoff
    raise AssertionError("no socket worked after Redis came back")


async def test_redis_down_rest_answers_sockets_close_cleanly_and_nothing_acked_is_lost(
    user, tmp_path
):
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    relay = await sync_to_async(RelayProcess)(tmp_path / "relay", REDIS_URL=redis.url)
    token = (await sync_to_async(accounts.session_open)(user=user)).token
    try:
        ws = await connect(f"{relay.ws_base}/ws?token={token}")
        assert (await submit(ws, "before"))["status"] == "queued"

        await sync_to_async(redis.stop)()

        # The open socket closes with 4503 "try again later", not an internal error.
        with pytest.raises(ConnectionClosed) as closed:
            async with asyncio.timeout(30):
                while True:
                    await ws.recv()
        assert closed.value.rcvd.code == 4503
        # REST keeps answering; health names the channel layer.
        status, me = await asyncio.to_thread(http, "GET", f"{relay.base}/api/user/me", token=token)
        assert status == 200 and me["email"] == user.email
        status, health = await asyncio.to_thread(http, "GET", f"{relay.base}/healthz")
        assert status == 503
        assert health == {"status": "unavailable", "database": "ok", "channelLayer": "unavailable"}
        status, ack = await asyncio.to_thread(
            http,
            "POST",
            f"{relay.base}/api/calls",
            {"callId": "during", "to": "+442079460127", "message": "hi"},
            token,
        )
        assert (status, ack["status"]) == (202, "queued")  # rate limit fails open, call is stored

        await sync_to_async(redis.start)()

        status, _ = await asyncio.to_thread(http, "GET", f"{relay.base}/healthz")
        assert status == 200
        # A client reconnects after 4503 as docs/operations.md says; the first attempts may
        # still meet connections the layer had open to the old Redis.
        assert (await reconnect_and_submit(relay, token, "after"))["status"] == "queued"

        def all_ended():
            calls = dict(Call.objects.values_list("call_id", "status"))
            return set(calls) == {"before", "during", "after"} and set(calls.values()) <= TERMINAL

        await sync_to_async(wait_until)(all_ended, deadline=60, what="every acked call to end")
    finally:
        await sync_to_async(relay.stop)()
        await sync_to_async(redis.stop)()


# --- Redis restarted again and again under a steady stream of calls ---------------------------
ANSWER_DEADLINE = 5.0  # seconds a call frame may wait for its ack, error frame or 4503 close
CLIENTS = 4
RESTARTS = 4
CALL_PACE = 0.1  # seconds a client waits between one answer and its next call
RECONNECT_BACKOFF = 0.2


@dataclass(frozen=True)
class Answer:
    client: int
    call_id: str
    kind: str  # "ack", "error", "closed" (with the close code) or "silent"
    seconds: float
    detail: object = None


async def answer_to_call(ws, client: int, call_id: str) -> Answer:
    """Send one call frame and wait, at most ANSWER_DEADLINE, for what answers it."""
    started = time.monotonic()

    def answer(kind: str, detail: object = None) -> Answer:
        return Answer(client, call_id, kind, time.monotonic() - started, detail)

    frame = {"type": "call", "callId": call_id, "to": "+442079460120", "message": "hi"}
    try:
        await ws.send(json.dumps(frame))
        async with asyncio.timeout(ANSWER_DEADLINE):
            while True:
                reply = json.loads(await ws.recv())
                if reply.get("callId") == call_id and reply["type"] == "call_ack":
                    return answer("ack", reply["status"])
                if reply.get("callId") == call_id and reply["type"] == "error":
                    return answer("error", reply["code"])
    except ConnectionClosed as closed:
        # A close without a close frame is kept with what the client saw, so a failure names it.
        return answer("closed", closed.rcvd.code if closed.rcvd else f"no close frame: {closed!r}")
    except TimeoutError:
        return answer("silent")


async def steady_client(relay, token: str, client: int, stop: asyncio.Event, answers: list):
    """Call, read the answer, pause, call again; on a close, reconnect after a backoff."""
    sent = 0
    while not stop.is_set():
        async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
            while not stop.is_set():
                sent += 1
                answers.append(got := await answer_to_call(ws, client, f"c{client}-{sent}"))
                if got.kind in ("closed", "silent"):
                    break
                await asyncio.sleep(CALL_PACE)
        await asyncio.sleep(RECONNECT_BACKOFF)


class SteadyClients:
    """CLIENTS steady_clients on one Relay, each with a token of `user`, all answers in one list."""

    def __init__(self, relay, tokens: list[str]):
        self.answers: list[Answer] = []
        self.stop = asyncio.Event()
        self.tasks = [
            asyncio.create_task(steady_client(relay, token, n, self.stop, self.answers))
            for n, token in enumerate(tokens)
        ]

    def every_client_had(self, kind: str, since: int, times: int = 1) -> bool:
        counts = Counter(a.client for a in self.answers[since:] if a.kind == kind)
        return all(counts[client] >= times for client in range(len(self.tasks)))

    async def wait_for_every_client(self, kind: str, times: int, what: str, deadline=15) -> None:
        """Until every client has had `times` answers of `kind` from now on."""
        check = partial(self.every_client_had, kind, len(self.answers), times=times)
        await eventually(check, deadline=deadline, what=what)

    async def finish(self) -> list[BaseException]:
        """Stop the clients (cancelled if still running after a failure); their errors."""
        self.stop.set()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        return [r for r in results if isinstance(r, BaseException)]

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()


async def restart_redis_under_the_clients(redis, clients: SteadyClients, restart: int) -> None:
    await asyncio.to_thread(redis.stop)
    # Every socket learns that Redis is gone, and so do the ones that reconnect while it is:
    # a 4503 close, never silence.
    await clients.wait_for_every_client("closed", 2, f"4503 closes while Redis is down ({restart})")
    await asyncio.to_thread(redis.start)
    # Once Redis is back, every client's calls are acked again.
    await clients.wait_for_every_client("ack", 10, f"acks once Redis is back ({restart})")


def every_call_ended(user, call_ids: set[str]) -> bool:
    calls = dict(Call.objects.filter(owner=user).values_list("call_id", "status"))
    return all(calls.get(call_id) in TERMINAL for call_id in call_ids)


async def test_every_call_is_answered_within_seconds_while_redis_restarts_again_and_again(
    user, tmp_path
):
    """Four clients call steadily while Redis is killed and restarted four times. Every call
    frame is answered (ack, error frame or 4503 close) within 5 s, sockets close with 4503
    while Redis is down, calls are acked again once it is back, and every acked call ends."""
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    relay = await sync_to_async(RelayProcess)(tmp_path / "relay", REDIS_URL=redis.url)
    tokens = [(await sync_to_async(accounts.session_open)(user=user)).token for _ in range(CLIENTS)]
    clients = SteadyClients(relay, tokens)
    try:
        await clients.wait_for_every_client("ack", 1, "first acks", deadline=30)
        for restart in range(RESTARTS):
            await restart_redis_under_the_clients(redis, clients, restart)
        assert await clients.finish() == []

        answers = clients.answers
        late = [a for a in answers if a.kind == "silent" or a.seconds > ANSWER_DEADLINE]
        assert late == [], f"{len(late)} of {len(answers)} call frames unanswered for 5 s"
        assert {a.detail for a in answers if a.kind == "closed"} == {4503}
        assert {a.detail for a in answers if a.kind == "ack"} == {"queued"}
        acked = {a.call_id for a in answers if a.kind == "ack"}
        await sync_to_async(wait_until)(
            partial(every_call_ended, user, acked), deadline=90, what="every acked call to end"
        )
    finally:
        clients.cancel()  # still running only if the test failed early
        await clients.finish()
        await sync_to_async(relay.stop)()
        await sync_to_async(redis.stop)()


async def test_a_hung_redis_delays_calls_by_seconds_and_closes_idle_sockets_with_4503(
    user, tmp_path
):
    """Redis frozen, not gone: connections stay open and nothing answers. Every Redis step
    has a timeout, so calls are still acked within seconds and idle sockets close with 4503
    together, not one socket's timeout after another."""
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    relay = await sync_to_async(RelayProcess)(tmp_path / "relay", REDIS_URL=redis.url)
    token = (await sync_to_async(accounts.session_open)(user=user)).token
    try:
        idle = [await connect(f"{relay.ws_base}/ws?token={token}") for _ in range(3)]
        caller = await connect(f"{relay.ws_base}/ws?token={token}")
        for ws in (*idle, caller):  # every consumer is up and waiting on the channel layer
            await ws.send(json.dumps({"type": "ping"}))
            assert json.loads(await ws.recv())["type"] == "pong"

        await asyncio.to_thread(redis.pause)
        frozen = time.monotonic()

        answer = await answer_to_call(caller, 0, "while-frozen")
        assert answer.kind == "ack" and answer.seconds < ANSWER_DEADLINE, answer

        async def close_code(ws) -> tuple[int | None, float]:
            with pytest.raises(ConnectionClosed) as closed:
                async with asyncio.timeout(30):
                    while True:
                        await ws.recv()
            return closed.value.rcvd.code, time.monotonic() - frozen

        closes = await asyncio.gather(*map(close_code, idle))
        assert {code for code, _ in closes} == {4503}
        # One blocking read's bound (5 s in Redis + 2 s), with room for a loaded machine.
        assert max(seconds for _, seconds in closes) < 12, closes

        await asyncio.to_thread(redis.resume)
        assert (await reconnect_and_submit(relay, token, "after-thaw"))["status"] == "queued"
    finally:
        await sync_to_async(redis.stop)()  # SIGKILL also ends a frozen server
        await sync_to_async(relay.stop)()
