"""Calls from the browser (issue 43, the outbound call without the console's page): a tab,
here aiortc as the browser, sends `rtc_offer` on its socket; the call is a call like any
(acked, policy, the calls list); the agent that claims it answers with `rtc_answer`, dials the
trunk (SIPp, which echoes), and bridges the tab to the callee. The tab closing its connection
hangs up; `rtc_hangup` ends the call as a cancel does."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from realtime.models import TERMINAL_STATES, CallRequest
from tests.live import DaphneProcess, PrivateRedis, WorkerProcess
from tests.telephony.browser_peer import BROWSER_SAYS, Browser, until
from tests.telephony.conftest import AgentProcess, Sipp, free_udp_port, sip_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

TO = "+442079460123"


async def next_frame(ws, call_id: str, kind: str, timeout: float = 30) -> dict:
    """The next frame of `kind` about `call_id` (others are passed over)."""
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") == call_id and frame["type"] == kind:
                return frame


async def status_frames(ws, call_id: str, timeout: float = 60) -> list[str]:
    """Its call_status frames until a terminal one."""
    seen = []
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") == call_id and frame["type"] == "call_status":
                seen.append(frame["status"])
                if frame["status"] in TERMINAL_STATES:
                    return seen


async def test_a_call_from_the_browser_talks_to_the_callee_and_ends_when_the_tab_hangs_up(
    sip_relay, sipp, login
):
    far_end = sipp("uas", echo=True)
    browser = Browser()
    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": "b1", "to": TO, "sdp": offer}))
            ack = json.loads(await ws.recv())
            assert ack == {"type": "call_ack", "callId": "b1", "status": "queued"}
            answer = await next_frame(ws, "b1", "rtc_answer")
            await browser.take(answer["sdp"])
            await until(lambda: browser.pc.connectionState == "connected", "the connection")
            await next_frame(ws, "b1", "call_status")  # on its way: dialing, then answered

            # The tab speaks; SIPp echoes; the tab hears its own words back, byte for byte.
            for _ in range(250):
                browser.track.push(BROWSER_SAYS)
                if len(browser.received) >= 10:
                    break
                await asyncio.sleep(0.02)
            assert len(browser.received) >= 10
            assert {payload for _, payload in browser.received} == {BROWSER_SAYS}

            await browser.pc.close()  # the tab hangs up
            assert (await status_frames(ws, "b1"))[-1] == "completed"
    finally:
        await browser.pc.close()
    call = await sync_to_async(CallRequest.objects.get)(call_id="b1")
    assert (call.status, call.to, call.message) == ("completed", TO, "")
    assert far_end.finish() == 0  # the agent's BYE ended SIPp's call
    assert far_end.invites() == [call.provider_call_id]


async def test_rtc_hangup_while_it_rings_cancels_the_call(sip_relay, sipp, login):
    far_end = sipp("ring")
    browser = Browser()
    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": "b2", "to": TO, "sdp": offer}))
            await browser.take((await next_frame(ws, "b2", "rtc_answer"))["sdp"])
            await until_status(ws, "b2", "ringing")
            await ws.send(json.dumps({"type": "rtc_hangup", "callId": "b2"}))
            assert (await status_frames(ws, "b2"))[-1] == "canceled"
    finally:
        await browser.pc.close()
    assert far_end.finish() == 0  # it was sent CANCEL


async def until_status(ws, call_id: str, status: str) -> None:
    async with asyncio.timeout(30):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") == call_id and frame.get("status") == status:
                return


async def test_the_keypad_of_a_call_from_the_browser_reaches_the_callee_as_rfc_4733(
    sip_relay, sipp, login
):
    # SIPp answers; the audio its SDP names is a socket of the test's, which reads it all.
    audio = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    audio.bind(("127.0.0.1", free_udp_port()))
    audio.setblocking(False)
    far_end = sipp("answer_media_at", audio_port=audio.getsockname()[1])
    browser = Browser()
    events: set[int] = set()
    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": "b3", "to": TO, "sdp": offer}))
            await browser.take((await next_frame(ws, "b3", "rtc_answer"))["sdp"])
            await until_status(ws, "b3", "in_progress")
            await until(lambda: browser.pc.connectionState == "connected", "the connection")
            await ws.send(json.dumps({"type": "rtc_dtmf", "callId": "b3", "digits": "7"}))

            def heard_seven() -> bool:
                while True:
                    try:
                        packet = audio.recv(2048)
                    except BlockingIOError:
                        return 7 in events
                    if packet[1] & 0x7F == 101:
                        events.add(packet[12])

            for _ in range(500):  # the browser keeps talking meanwhile, as a microphone does
                browser.track.push(BROWSER_SAYS)
                if heard_seven():
                    break
                await asyncio.sleep(0.02)
            await ws.send(json.dumps({"type": "rtc_hangup", "callId": "b3"}))
    finally:
        await browser.pc.close()
        audio.close()
    assert events == {7}
    assert await asyncio.to_thread(far_end.finish) == 0


async def test_an_agent_killed_mid_call_ends_the_tabs_call_once_and_tells_the_tab(login, tmp_path):
    """The agent holding a call from the browser dies (SIGKILL) mid-talk. The call ends once,
    failed/agent_lost, when recovery takes it; the tab's socket is told with its terminal
    call_status (the page then says "The call ended (failed)."); the callee was dialled once.
    The socket, the worker and the agent run apart here, so that one can die alone."""
    redis = await sync_to_async(PrivateRedis)(tmp_path / "redis")
    trunk = free_udp_port()
    env = sip_env(
        tmp_path, trunk, REDIS_URL=redis.url, CALL_RECOVERY_GRACE=2, CALL_RECOVERY_INTERVAL=0.3
    )
    started = []

    async def start(child, *args, **kwargs):
        started.append(await sync_to_async(child)(*args, **kwargs))
        return started[-1]

    browser = Browser()
    try:
        far_end = await start(Sipp, tmp_path / "sipp", "uas", port=trunk, echo=True, timeout=60)
        web = await start(DaphneProcess, tmp_path, log=tmp_path / "daphne.log", **env)
        await start(WorkerProcess, tmp_path, **env)
        agent = await start(AgentProcess, tmp_path, env)
        async with connect(f"{web.ws_base}/ws?token={login.token}") as ws:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": "k1", "to": TO, "sdp": offer}))
            await browser.take((await next_frame(ws, "k1", "rtc_answer"))["sdp"])
            await until_status(ws, "k1", "in_progress")
            await until(lambda: browser.pc.connectionState == "connected", "the connection")

            await asyncio.to_thread(agent.kill)
            ended = await next_frame(ws, "k1", "call_status", timeout=60)
            assert (ended["status"], ended["reason"]) == ("failed", "agent_lost")
            # Nothing more about it: no second terminal status, however long one waits for
            # the next frame (a ping's pong comes first).
            await ws.send(json.dumps({"type": "ping"}))
            async with asyncio.timeout(10):
                while (frame := json.loads(await ws.recv()))["type"] != "pong":
                    assert frame.get("callId") != "k1", frame
    finally:
        await browser.pc.close()
        for child in reversed(started):
            await sync_to_async(child.stop)()
        await sync_to_async(redis.stop)()
    call = await sync_to_async(CallRequest.objects.get)(call_id="k1")
    assert (call.status, call.failure_reason) == ("failed", "agent_lost")
    terminal = call.events.filter(status__in=TERMINAL_STATES)
    assert await sync_to_async(terminal.count)() == 1
    assert far_end.invites() == [call.provider_call_id]
