"""A call is dialled at most once, whatever happens to the agents: killed mid-call, several
claiming from one database, a hundred calls against a real far end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.db.models import Count

from calls.models import Call
from calls.states import TERMINAL_STATES
from harness.live import AgentProcess, RelayProcess, WorkerProcess, http, wait_until
from harness.ports import rtp_range
from harness.sip import Sipp, free_udp_port
from tests.factories import UserFactory
from tests.telephony.conftest import sip_env, status_of, submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def user(db):
    """A hundred calls at once: far past the free plan's quotas, which this module does not
    test (tests/accounts/test_quotas.py does)."""
    return UserFactory(unmetered=True)


LONG = " ".join(["This message keeps the callee listening for a while."] * 6)


def test_an_agent_killed_mid_call_never_dials_again_and_the_call_fails_agent_lost(user, tmp_path):
    trunk = free_udp_port()
    env = sip_env(tmp_path, trunk, CALL_RECOVERY_GRACE=2, CALL_RECOVERY_INTERVAL=0.3)
    far_end = Sipp(tmp_path / "sipp", "uas", port=trunk, calls=2, echo=True, timeout=60)
    worker = WorkerProcess(tmp_path, **env)
    first = AgentProcess(tmp_path, env, name="first")
    second = None
    try:
        call = submit(user, "killed", LONG)
        wait_until(lambda: status_of(call) == "in_progress", deadline=30, what="the answer")

        first.kill()
        second = AgentProcess(tmp_path, env, name="second")
        wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=30, what="recovery")
        # The second agent works (it places a new call) and never dialled the old one.
        later = submit(user, "later")
        wait_until(lambda: status_of(later) in TERMINAL_STATES, deadline=30, what="the next call")

        assert (call.status, call.failure_reason) == ("failed", "agent_lost")
        assert later.status == "completed"
        assert far_end.invites() == [call.sip_call_id, later.sip_call_id]
    finally:
        for process in (second, worker, far_end):
            if process is not None:
                process.stop()


def test_an_agent_killed_during_a_gather_ends_the_call_once_and_dials_nobody_again(user, tmp_path):
    trunk = free_udp_port()
    env = sip_env(tmp_path, trunk, CALL_RECOVERY_GRACE=2, CALL_RECOVERY_INTERVAL=0.3)
    sipp = Sipp(
        tmp_path / "sipp",
        "answer_keys",
        port=trunk,
        calls=1,
        timeout=60,
        before_ms=60000,  # never presses: the agent dies while the gather waits
        presses="",
        capture="",
        hangup_timeout_ms=1000,
    )
    worker = WorkerProcess(tmp_path, **env)
    first = AgentProcess(tmp_path, env, name="first")
    second = None
    try:
        call = submit(user, "killed", script=[{"gather": {"timeout": 60}}])
        wait_until(lambda: status_of(call) == "in_progress", deadline=30, what="the answer")

        first.kill()
        second = AgentProcess(tmp_path, env, name="second")
        wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=30, what="recovery")

        assert (call.status, call.failure_reason) == ("failed", "agent_lost")
        assert call.events.filter(status__in=TERMINAL_STATES).count() == 1
        assert sipp.invites() == [call.sip_call_id]
    finally:
        for process in (second, first, worker, sipp):
            if process is not None:
                process.stop()


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory, django_db_setup):
    """runrelay with two telephony agents of 10 calls each, against one SIPp port."""
    workdir = tmp_path_factory.mktemp("two-agents")
    trunk = free_udp_port()
    env = sip_env(
        workdir, trunk, SIP_AGENTS=2, SIP_MAX_CONCURRENT_CALLS=10, RTP_PORT_RANGE=rtp_range(1000)
    )
    relay = RelayProcess(workdir, log=workdir / "relay.log", **env)
    relay.trunk_port, relay.workdir = trunk, workdir
    yield relay
    relay.stop()


def agent_cpu_seconds(relay: RelayProcess) -> float:
    """CPU time used so far by the telephony agents runrelay started."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if b"telephony_agent" in cmdline and int(fields[1]) == relay.proc.pid:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


@pytest.mark.parametrize(("count", "message"), [(10, "Hello from Relay."), (100, "Hi.")])
def test_every_call_is_dialled_once_by_one_of_several_agents(
    two_agents, login, tmp_path, count, message, capsys
):
    far_end = Sipp(tmp_path / "sipp", "uas", port=two_agents.trunk_port, calls=count, echo=True)
    cpu_before = agent_cpu_seconds(two_agents)
    started = time.monotonic()
    for i in range(count):
        body = {"callId": f"many-{i}", "to": "+442079460123", "message": message}
        status, _ = http("POST", f"{two_agents.base}/api/calls", body, login.token)
        assert status == 202

    def ended() -> bool:
        return Call.objects.filter(status__in=TERMINAL_STATES).count() == count

    wait_until(ended, deadline=count * 3 + 30, what=f"{count} calls to end", interval=0.2)
    elapsed = time.monotonic() - started
    cpu = agent_cpu_seconds(two_agents) - cpu_before

    assert far_end.finish() == 0
    outcomes = dict(Call.objects.values_list("status").annotate(n=Count("id")))
    assert outcomes == {"completed": count}
    dialled = far_end.invites()
    assert len(dialled) == count
    assert set(dialled) == set(Call.objects.values_list("sip_call_id", flat=True))
    with capsys.disabled():
        print(
            f"\n{count} SIP calls on 2 agents in {elapsed:.1f} s: agents' CPU "
            f"{cpu:.2f} s, {1000 * cpu / count:.0f} ms per call"
        )
