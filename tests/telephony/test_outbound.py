"""Real calls over SIP (DESIGN §5.7): Relay with TELEPHONY_PROVIDER=sip against SIPp, driven
through the real WebSocket, checked by the frames, the row and SIPp's own verdict."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from calls.models import Call
from calls.states import TERMINAL_STATES
from harness.live import http
from telephony.speech import Speech

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SHORT = "Hello from Relay. The parcel is at the door."
LONG = " ".join(["This message is long enough to be interrupted."] * 8)


def call_frame(call_id: str, message: str = SHORT, **extra) -> dict:
    return {"type": "call", "callId": call_id, "to": "+442079460123", "message": message, **extra}


async def frames_of_call(
    ws, call_id: str, *, until=TERMINAL_STATES, timeout: float = 60
) -> list[dict]:
    """Frames about `call_id` until one of its call_status frames is in `until`."""
    frames = []
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") != call_id:
                continue
            frames.append(frame)
            if frame["type"] == "call_status" and frame["status"] in until:
                return frames


def statuses(frames: list[dict]) -> list[str]:
    return [f["status"] for f in frames if f["type"] == "call_status"]


async def place(relay, token: str, frame: dict, **kwargs) -> list[dict]:
    async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
        await ws.send(json.dumps(frame))
        return await frames_of_call(ws, frame["callId"], **kwargs)


def spoken_seconds(message: str, tmp_path) -> float:
    """How long espeak-ng says `message`: what the agent plays."""
    return len(Speech(tmp_path / "tts").render(message, "en")[0]) / 8000


def media_line(relay, call: Call) -> dict[str, float]:
    """The agent's account of the call's audio, from its log."""
    text = (relay.workdir / "relay.log").read_text()
    found = re.search(
        rf"call {call.pk} ended: \S+ \S*; audio sent (\d+) packets, received (\d+) packets "
        r"\(([\d.]+) s, ([\d.]+) s of it speech\)",
        text,
    )
    assert found, f"no media line for call {call.pk} in the agent's log"
    sent, received, seconds, speech = found.groups()
    return {
        "sent": int(sent),
        "received": int(received),
        "seconds": float(seconds),
        "speech": float(speech),
    }


async def test_an_answered_call_speaks_the_message_and_hangs_up(sip_relay, sipp, login, tmp_path):
    far_end = sipp("uas", echo=True)

    frames = await place(sip_relay, login.token, call_frame("answered"))

    assert statuses(frames) == ["queued", "dialing", "ringing", "in_progress", "completed"]
    assert far_end.finish() == 0
    call = await sync_to_async(Call.objects.get)(call_id="answered")
    expected = spoken_seconds(SHORT, tmp_path)
    assert call.status == "completed" and call.failure_reason == ""
    assert abs(call.duration - expected) <= 1
    assert frames[-1]["duration"] == call.duration
    assert far_end.invites() == [call.sip_call_id]
    invite = far_end.received("INVITE")[0]
    assert f"INVITE sip:{call.to}@" in invite
    assert re.search(rf"^From: <sip:{re.escape(call.caller_id)}@", invite, re.MULTILINE)
    # The audio really travelled: SIPp echoed about the message's length of loud packets.
    media = media_line(sip_relay, call)
    assert abs(media["sent"] * 0.02 - expected) < 0.5
    assert abs(media["seconds"] - expected) < 1
    assert media["speech"] > expected / 3


@pytest.mark.parametrize(
    ("code", "phrase", "ending", "reason"),
    [
        (486, "Busy Here", "busy", None),
        (600, "Busy Everywhere", "busy", None),
        (603, "Decline", "failed", "declined"),
        (404, "Not Found", "failed", "404 Not Found"),
        (503, "Service Unavailable", "failed", "503 Service Unavailable"),
    ],
)
async def test_a_refused_call_ends_as_the_sip_code_says(
    sip_relay, sipp, login, code, phrase, ending, reason
):
    far_end = sipp("reject", status=code, phrase=phrase)

    frames = await place(sip_relay, login.token, call_frame(f"refused-{code}"))

    assert statuses(frames) == ["queued", "dialing", "ringing", ending]
    assert frames[-1].get("reason") == reason
    assert far_end.finish() == 0  # it got its ACK


async def test_a_call_nobody_answers_is_canceled_at_the_ring_timeout(sip_relay, sipp, login):
    far_end = sipp("ring")
    started = time.monotonic()

    frames = await place(sip_relay, login.token, call_frame("unanswered"))

    assert statuses(frames) == ["queued", "dialing", "ringing", "no_answer"]
    assert 4.5 < time.monotonic() - started < 15  # SIP_RING_TIMEOUT is 5 s
    assert far_end.finish() == 0  # it got the CANCEL, and the ACK for its 487


async def test_a_trunk_that_never_answers_fails_at_the_ring_timeout_not_timer_b(sip_relay, login):
    started = time.monotonic()  # nothing listens on the trunk's port

    frames = await place(sip_relay, login.token, call_frame("unreachable"))

    assert statuses(frames) == ["queued", "dialing", "failed"]
    assert frames[-1]["reason"] == "408 Request Timeout"
    assert time.monotonic() - started < 15  # SIP_RING_TIMEOUT's 5 s, not Timer B's 32 s


async def test_the_callee_hanging_up_mid_message_completes_with_the_real_duration(
    sip_relay, sipp, login, tmp_path
):
    assert spoken_seconds(LONG, tmp_path) > 10
    far_end = sipp("answer_then_bye", hangup_ms=2000)

    frames = await place(sip_relay, login.token, call_frame("hung-up", LONG))

    assert statuses(frames) == ["queued", "dialing", "ringing", "in_progress", "completed"]
    assert frames[-1]["reason"] == "remote_hangup"
    assert frames[-1]["duration"] == 2
    assert far_end.finish() == 0


@pytest.mark.parametrize(
    ("scenario", "cancel_in"),
    [
        ("ring", "ringing"),  # SIPp then sees CANCEL, answers 487 and gets its ACK
        ("uas", "in_progress"),  # SIPp then sees BYE, at once rather than after the message
    ],
)
async def test_a_user_cancel_hangs_up_the_call_where_it_is(
    sip_relay, sipp, login, scenario, cancel_in
):
    far_end = sipp(scenario, echo=True)
    async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
        await ws.send(json.dumps(call_frame("canceled", LONG)))
        await frames_of_call(ws, "canceled", until={cancel_in})

        status, body = await asyncio.to_thread(
            http, "POST", f"{sip_relay.base}/api/calls/canceled/cancel", None, login.token
        )
        frames = await frames_of_call(ws, "canceled")

    assert (status, body["status"]) == (200, "canceled")
    assert statuses(frames) == ["canceled"]
    assert far_end.finish(timeout=10) == 0  # well before the ring timeout or the message end
    call = await sync_to_async(Call.objects.get)(call_id="canceled")
    assert (call.status, call.failure_reason) == ("canceled", "canceled by the user")
