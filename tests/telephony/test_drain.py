"""Agents that drain (issue 42): an agent answers OPTIONS 200 while it takes calls; on
SIGTERM, or `telephony_agent --drain`, it refuses new INVITEs and OPTIONS with 503 and
Retry-After, claims no outbound call, keeps its live calls to their end and exits 0; past
SIP_DRAIN_SECONDS it hangs up what is left. SIPp is the far end and the caller; the probes
are raw SIP over UDP, as an edge's dispatcher sends them."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid
from types import SimpleNamespace

import pytest

from calls.models import Call
from calls.states import TERMINAL_STATES
from harness.live import ROOT, AgentProcess, relay_env, wait_until
from harness.sip import Sipp, free_udp_port
from tests.factories import NumberFactory
from tests.telephony.conftest import call_in, sip_env, status_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def probe(agent: str, *, source: str = "127.0.0.1") -> str:
    """An OPTIONS out of any dialog to `agent` (host:port), as Kamailio's dispatcher sends
    it, from an address of this host's (`source`); the response's text ("" when none came
    within a second: an agent not up yet)."""
    host, port = agent.split(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((source, 0))
        sock.settimeout(1)
        local = sock.getsockname()[1]
        tag = uuid.uuid4().hex
        request = (
            f"OPTIONS sip:{host}:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP {source}:{local};branch=z9hG4bK{tag}\r\n"
            "Max-Forwards: 70\r\n"
            f"From: <sip:edge@{source}:{local}>;tag={tag[:8]}\r\n"
            f"To: <sip:{host}:{port}>\r\n"
            f"Call-ID: {tag}@edge\r\n"
            "CSeq: 1 OPTIONS\r\n"
            "Content-Length: 0\r\n\r\n"
        )
        sock.sendto(request.encode(), (host, int(port)))
        try:
            return sock.recv(4096).decode()
        except TimeoutError:
            return ""


@pytest.fixture
def agent(tmp_path):
    """An agent of its own (each test stops it), its trunk on `trunk_port`."""
    trunk = free_udp_port()
    env = sip_env(tmp_path, trunk)
    process = AgentProcess(tmp_path, env)
    process.trunk_port, process.address, process.env = trunk, env["SIP_BIND"], env
    wait_until(
        lambda: probe(process.address).startswith("SIP/2.0 200"),
        deadline=30,
        what="the agent to answer OPTIONS",
    )
    yield process
    process.stop()


def callee(agent, tmp_path) -> Sipp:
    """The far end: answers, and waits for Relay's BYE."""
    return Sipp(
        tmp_path / "callee",
        "answer_keys",
        port=agent.trunk_port,
        timeout=60,
        before_ms=0,
        presses="",
        capture="",
        hangup_timeout_ms=60000,
    )


def live_call(user, agent, call_id: str, seconds: int) -> Call:
    """An outbound call that lasts `seconds` once answered (a script's pause), up now."""
    from realtime.services import call_submit

    script = [{"pause": {"seconds": seconds}}]
    call = call_submit(
        user=user, data={"callId": call_id, "to": "+442079460123", "script": script}
    )[0]
    wait_until(lambda: status_of(call) == "in_progress", deadline=30, what="the call's answer")
    return call


def test_a_drained_agent_refuses_new_calls_and_exits_once_its_live_call_ends(agent, tmp_path, user):
    sipp = callee(agent, tmp_path)
    live = live_call(user, agent, "live", seconds=4)

    agent.proc.send_signal(signal.SIGTERM)

    wait_until(
        lambda: probe(agent.address).startswith("SIP/2.0 503"),
        deadline=10,
        what="OPTIONS to be refused",
    )
    refused = probe(agent.address)
    assert "\r\nRetry-After: 30\r\n" in refused, refused
    # A call from the trunk meanwhile gets 503 as well, so that the edge tries another agent.
    number = NumberFactory(owner=user)
    caller = call_in(agent.address, tmp_path, "inbound_refused", number.number, status=503)
    assert caller.finish(30) == 0, caller
    # An outbound call submitted meanwhile is left for another agent.
    from realtime.services import call_submit

    waiting = call_submit(
        user=user, data={"callId": "later", "to": "+442079460124", "message": "Hello."}
    )[0]

    assert agent.proc.wait(timeout=30) == 0  # once the live call ended
    live.refresh_from_db()
    assert (live.status, live.failure_reason) == ("completed", "")
    assert live.duration >= 4  # kept to its end, not cut
    assert status_of(waiting) == "queued"
    assert sipp.finish() == 0, sipp
    assert sipp.invites() == [live.sip_call_id]  # nobody else was dialled
    log = agent.log_path.read_text()
    assert "draining: new calls refused (503), 1 live call(s)" in log
    assert "drained: no live call left" in log


def test_past_sip_drain_seconds_the_calls_left_are_hung_up(tmp_path, user):
    trunk = free_udp_port()
    env = sip_env(tmp_path, trunk, SIP_DRAIN_SECONDS="1")
    agent = AgentProcess(tmp_path, env)
    agent.trunk_port, agent.address = trunk, env["SIP_BIND"]
    try:
        wait_until(lambda: probe(agent.address).startswith("SIP/2.0 200"), deadline=30,
                   what="the agent to answer OPTIONS")  # fmt: skip
        sipp = callee(agent, tmp_path)
        live = live_call(user, agent, "long", seconds=60)

        agent.proc.send_signal(signal.SIGTERM)

        assert agent.proc.wait(timeout=20) == 0
        wait_until(lambda: status_of(live) in TERMINAL_STATES, deadline=10, what="the call's end")
        live.refresh_from_db()
        assert (live.status, live.failure_reason) == ("failed", "agent_stopped")
        assert sipp.finish() == 0, sipp  # it got Relay's BYE
        assert "SIP_DRAIN_SECONDS passed with 1 live call(s)" in agent.log_path.read_text()
    finally:
        agent.stop()


def drain_command(agent_env: dict, workdir) -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603 - our own command
        [sys.executable, "manage.py", "telephony_agent", "--drain"],
        cwd=ROOT,
        env=relay_env(workdir, **agent_env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_drain_command_waits_for_the_live_call_then_the_agent_is_gone(agent, tmp_path, user):
    sipp = callee(agent, tmp_path)
    live = live_call(user, agent, "live", seconds=3)

    drained = drain_command(agent.env, tmp_path)

    assert drained.returncode == 0, drained.stderr
    assert "telephony agent 0 drained and stopped" in drained.stdout
    assert agent.proc.wait(timeout=5) == 0  # exited when the command returned
    live.refresh_from_db()
    assert (live.status, live.failure_reason) == ("completed", "")
    assert sipp.finish() == 0, sipp
    assert not (tmp_path / "telephony-agent-0.pid").exists()
    # Nothing left to drain: a clear refusal, not a hang.
    again = drain_command(agent.env, tmp_path)
    assert again.returncode != 0
    assert "no telephony agent 0 is running on this host" in again.stderr


def test_runrelay_stopped_drains_its_agent_before_the_rest(tmp_path, user):
    """runrelay's Ctrl-C or SIGTERM: the agent drains (its live call ends as it would have)
    while the servers it needs still run, then everything stops."""
    from harness.live import RelayProcess

    trunk = free_udp_port()
    relay = RelayProcess(tmp_path, log=tmp_path / "relay.log", **sip_env(tmp_path, trunk))
    try:
        sipp = callee(SimpleNamespace(trunk_port=trunk), tmp_path)
        live = live_call(user, None, "live", seconds=3)

        relay.proc.send_signal(signal.SIGTERM)

        assert relay.proc.wait(timeout=60) == 0
        live.refresh_from_db()
        assert (live.status, live.failure_reason) == ("completed", "")
        assert live.duration >= 3
        assert sipp.finish() == 0, sipp
        assert "Draining the telephony agents" in (tmp_path / "relay.log").read_text()
    finally:
        relay.stop()


def test_under_runrelay_a_drained_agent_starts_again_and_the_rest_runs_on(tmp_path, user):
    """`telephony_agent --drain` on a host that runs runrelay: the agent drains and exits, and
    runrelay starts it again (on the code now installed) instead of stopping Relay."""
    from harness.live import RelayProcess

    trunk = free_udp_port()
    env = sip_env(tmp_path, trunk)
    relay = RelayProcess(tmp_path, log=tmp_path / "relay.log", **env)
    pid_file = tmp_path / "telephony-agent-0.pid"
    try:
        wait_until(lambda: probe(env["SIP_BIND"]).startswith("SIP/2.0 200"), deadline=30,
                   what="the agent to answer OPTIONS")  # fmt: skip
        first = pid_file.read_text().strip()

        drained = drain_command(env, tmp_path)

        assert drained.returncode == 0, drained.stderr
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() not in ("", first),
                   deadline=30, what="runrelay to start the agent again")  # fmt: skip
        wait_until(lambda: probe(env["SIP_BIND"]).startswith("SIP/2.0 200"), deadline=30,
                   what="the new agent to answer OPTIONS")  # fmt: skip
        assert relay.proc.poll() is None  # Relay runs on
        assert (
            "telephony agent 0 drained and exited; starting it again"
            in (tmp_path / "relay.log").read_text()
        )
        # And it places calls: the new agent claims one and it completes.
        sipp = callee(SimpleNamespace(trunk_port=trunk), tmp_path)
        call = live_call(user, None, "after", seconds=1)
        wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=30, what="the call to end")
        assert status_of(call) == "completed"
        assert sipp.finish() == 0, sipp
    finally:
        relay.stop()
