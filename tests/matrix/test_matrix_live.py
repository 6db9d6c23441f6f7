"""The Matrix bot as a newcomer meets it, on a live `manage.py runrelay` against the session's
real Synapse: runrelay starts `matrix_bot` beside its other children, the invite arrives as a
direct chat, the join is seen by the live /sync loop, a call placed on the socket is told in
the room once, a `!call` typed in the room is placed and answered in its thread, and SIGTERM
stops every process.

Unlike tests/matrix/test_matrix_bot.py nothing here runs the bot in this process: the only
ways in are HTTP, the WebSocket and the Synapse users' own client-server API.
"""

from __future__ import annotations

import json
import re
import signal
import uuid

import psutil
import pytest
from websockets.sync.client import connect

from harness.live import WORKER_POLL_INTERVAL, RelayProcess, cmdline, http, wait_until
from harness.synapse import MatrixUser
from matrix.models import MatrixBotState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

DEADLINE = 30  # seconds for each thing the live processes do
SOCKET_TARGET = "+442079460123"
CHAT_TARGET = "+442079460124"


@pytest.fixture
def bot_account(synapse) -> MatrixUser:
    """A bot account of this test alone: no room, m.direct or sync position of another."""
    return synapse.register(f"relay-bot-live-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def relay(tmp_path, synapse, bot_account):
    """runrelay on the test database with Matrix on, the bot's /sync cycling every second and
    simulated calls that end at once. Stopped (SIGTERM) at teardown if the test has not."""
    process = RelayProcess(
        tmp_path,
        MATRIX_HOMESERVER_URL=synapse.url,
        MATRIX_BOT_ACCESS_TOKEN=bot_account.access_token,
        MATRIX_BOT_USER_ID=bot_account.user_id,
        MATRIX_SYNC_TIMEOUT="1",
        SIMULATED_STEP_SECONDS="0.02",
        SIMULATED_TALK_SCALE="0",
        WORKER_POLL_INTERVAL=WORKER_POLL_INTERVAL,
    )
    yield process
    process.stop()


def from_bot(events: list[dict], bot_id: str) -> list[dict]:
    return [e for e in events if e["type"] == "m.room.message" and e["sender"] == bot_id]


def in_thread(events: list[dict], root: str) -> list[dict]:
    return [
        e
        for e in events
        if e["content"].get("m.relates_to", {}).get("rel_type") == "m.thread"
        and e["content"]["m.relates_to"].get("event_id") == root
    ]


def outside_threads(events: list[dict]) -> list[dict]:
    return [e for e in events if "m.relates_to" not in e["content"]]


def children_once_the_bot_runs(relay) -> list[psutil.Process]:
    """Once runrelay has started the bot's /sync loop as one of its own children: every
    process runrelay started."""
    runrelay = psutil.Process(relay.proc.pid)
    wait_until(
        lambda: any("matrix_bot" in cmdline(child) for child in runrelay.children()),
        deadline=DEADLINE,
        what="a matrix_bot child of runrelay",
    )
    return runrelay.children(recursive=True)


def newcomer_joins(relay, member: MatrixUser, bot_id: str) -> tuple[str, str]:
    """A newcomer registers and gives their Matrix id, is invited to a direct room and joins
    it, and the live bot sees the join: their JWT and the room's id."""
    email = f"newcomer-{uuid.uuid4().hex[:8]}@example.com"
    credentials = {"email": email, "password": "a-long-and-unusual-passphrase"}
    status, registered = http("POST", f"{relay.base}/api/auth/register", credentials)
    assert status == 201, registered
    token = registered["token"]
    status, body = http("PUT", f"{relay.base}/api/user/matrix", {"matrixId": member.user_id}, token)
    assert (status, body) == (
        200,
        {"success": True, "matrixId": member.user_id, "matrixStatus": "invited"},
    )
    room_id, invite_state = member.wait_for_invite(deadline=DEADLINE)
    (own,) = [
        e for e in invite_state if e["type"] == "m.room.member" and e["state_key"] == member.user_id
    ]
    assert (own["content"]["membership"], own["content"]["is_direct"]) == ("invite", True)
    assert own["sender"] == bot_id
    member.join(room_id)

    def joined() -> bool:
        status, me = http("GET", f"{relay.base}/api/user/me", token=token)
        assert status == 200, me
        return me["matrixStatus"] == "joined"

    wait_until(joined, deadline=DEADLINE, what="matrixStatus joined (the live bot saw the join)")
    return token, room_id


def call_on_the_socket(relay, token: str, call_id: str) -> dict:
    """Place a call on the socket: its `completed` frame."""
    status, dashboard = http("GET", f"{relay.base}/api/dashboard", token=token)
    assert status == 200, dashboard
    assert dashboard["matrixStatus"] == "joined"
    with connect(dashboard["wsUrl"], open_timeout=10) as ws:
        ws.send(
            json.dumps({"type": "call", "callId": call_id, "to": SOCKET_TARGET, "message": "Hi"})
        )

        def completed() -> dict | None:
            try:
                received = json.loads(ws.recv(timeout=1))
            except TimeoutError:
                return None
            assert received["type"] != "error", received
            done = received["type"] == "call_status" and received["status"] == "completed"
            return received if done and received["callId"] == call_id else None

        return wait_until(
            completed, deadline=DEADLINE, what=f"call {call_id} completed", interval=0
        )


def told_once_in_the_room(member: MatrixUser, room_id: str, bot_id: str, told: str) -> None:
    def socket_call_told(events: list[dict]) -> bool:
        return any(e["content"].get("body") == told for e in from_bot(events, bot_id))

    events = member.wait_for_events(room_id, socket_call_told, deadline=DEADLINE)
    (notice,) = [
        e
        for e in outside_threads(from_bot(events, bot_id))
        if e["content"]["body"].startswith(f"Your call to {SOCKET_TARGET}")
    ]
    assert (notice["content"]["msgtype"], notice["content"]["body"]) == ("m.notice", told)


def call_from_the_chat(relay, token, member: MatrixUser, room_id: str, bot_id: str):
    """`!call` typed in the room: placed, with callId the command's event id, and answered in
    the command's thread: queued, then how it ended. The command's event id, the calls page and
    the room's events."""
    command = member.send_text(room_id, f"!call {CHAT_TARGET} Hello from the chat")

    def answered(events: list[dict]) -> bool:
        return len(in_thread(from_bot(events, bot_id), command)) >= 2

    events = member.wait_for_events(room_id, answered, deadline=DEADLINE)
    status, page = http("GET", f"{relay.base}/api/calls", token=token)
    assert status == 200, page
    (call,) = [c for c in page["calls"] if c["callId"] == command]
    assert (call["to"], call["message"], call["status"]) == (
        CHAT_TARGET,
        "Hello from the chat",
        "completed",
    )
    replies = in_thread(from_bot(events, bot_id), command)
    assert [e["content"]["body"] for e in replies] == [
        f"Calling {CHAT_TARGET}: queued (call id {command}).",
        f"Your call to {CHAT_TARGET} completed, {call['duration']} s.",
    ]
    assert re.fullmatch(r"Your call to \S+ completed, \d+ s\.", replies[1]["content"]["body"])
    assert all(e["content"]["msgtype"] == "m.notice" for e in replies)
    return command, page, events


def sigterm_stops_everything(relay, children: list[psutil.Process]) -> None:
    """SIGTERM stops runrelay and every process it started, the bot's /sync loop too, and the
    bot lets go of its reader's lease: the next start reads at once, not after it lapses."""
    relay.proc.send_signal(signal.SIGTERM)
    assert relay.proc.wait(timeout=30) == 0
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running: {[(p.pid, cmdline(p)) for p in alive]}"
    state = MatrixBotState.objects.get()
    assert (state.sync_holder, state.sync_lease_until) == ("", None)


def test_a_newcomer_joins_the_bots_room_hears_of_a_call_and_places_one_from_the_chat(
    relay, bot_account, matrix_user_factory
):
    bot_id = bot_account.user_id
    children = children_once_the_bot_runs(relay)
    member = matrix_user_factory("newcomer")
    token, room_id = newcomer_joins(relay, member, bot_id)

    final = call_on_the_socket(relay, token, "live-1")
    told = f"Your call to {SOCKET_TARGET} completed, {final['duration']} s."
    told_once_in_the_room(member, room_id, bot_id, told)

    command, page, events = call_from_the_chat(relay, token, member, room_id, bot_id)
    # Both calls are listed, and each was told once: the chat's only in its thread.
    assert sorted(c["callId"] for c in page["calls"]) == sorted(["live-1", command])
    bodies = [e["content"]["body"] for e in outside_threads(from_bot(events, bot_id))]
    assert bodies == [told]

    sigterm_stops_everything(relay, children)
