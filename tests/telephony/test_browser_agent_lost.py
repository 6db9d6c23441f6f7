"""An agent killed mid-call from the browser (issue 43). The socket (Daphne), the worker and
the agent run apart, so that the agent can die alone; in a module of its own, so that no other
module's agent is alive to claim its call from the shared test database."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from calls.models import Call
from calls.states import TERMINAL_STATES
from harness.live import AgentProcess, DaphneProcess, WorkerProcess
from harness.private import PrivateRedis
from harness.sip import Sipp, free_udp_port
from tests.telephony.browser_peer import Browser, call_from_the_browser, next_frame
from tests.telephony.conftest import sip_env

TO = "+442079460123"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


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
            await call_from_the_browser(ws, browser, "k1", TO)

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
    call = await sync_to_async(Call.objects.get)(call_id="k1")
    assert (call.status, call.failure_reason) == ("failed", "agent_lost")
    terminal = call.events.filter(status__in=TERMINAL_STATES)
    assert await sync_to_async(terminal.count)() == 1
    assert far_end.invites() == [call.sip_call_id]
