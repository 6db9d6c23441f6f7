"""The shipped SIP edge (issue 42): deploy/kamailio/relay-edge.cfg as it is, with a local file
of this test's addresses, in front of two telephony agents on one host. It passes
`kamailio -c`; calls from the trunk (SIPp) are spread over both agents; an agent drained in
the middle of a call finishes that call while the calls after it go to the other agent,
none of them failing; a killed agent is taken out by the OPTIONS probes; and the operator's
walk-through of docs/operations.md (issue 55) holds under runrelay."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from harness.baresip import Baresip
from harness.kamailio import Edge, edge_files, free_dual_port, tls_config
from harness.live import AgentProcess, tool, wait_until
from harness.ports import tcp_listening
from harness.sip import MESSAGE_SECONDS, free_udp_port
from harness.speech import silence_wav
from tests.factories import NumberFactory
from tests.telephony.conftest import call_in, sip_env, wait_for_records
from tests.telephony.interop.conftest import CALLER
from tests.telephony.test_drain import probe

pytestmark = [
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
]


def test_the_shipped_edge_passes_kamailios_check(tmp_path):
    config = edge_files(
        tmp_path, port=free_udp_port(), agents=["127.0.0.1:5070"], trunk="127.0.0.1:5062"
    )

    checked = subprocess.run(  # noqa: S603 - kamailio, with a file of ours
        [tool("kamailio"), "-c", "-f", str(config)], capture_output=True, text=True, check=False
    )

    assert checked.returncode == 0, checked.stderr[-2000:]


@pytest.fixture
def site(tmp_path, django_db_setup):
    """Two agents (voicemail after 1 s of ringing) behind the edge; their trunk is the edge,
    the edge's trunk a port nobody listens on (these calls only come in)."""
    edge_port = free_udp_port()
    agents = []
    try:
        for name in ("a", "b"):
            workdir = tmp_path / name
            workdir.mkdir()
            env = sip_env(workdir, edge_port, INBOUND_RING_SECONDS=1)
            agent = AgentProcess(workdir, env, name=name)
            agent.address = env["SIP_BIND"]
            agents.append(agent)
        for agent in agents:
            wait_until(lambda a=agent: probe(a.address).startswith("SIP/2.0 200"), deadline=30,
                       what="an agent to answer OPTIONS")  # fmt: skip
        trunk = f"127.0.0.1:{free_udp_port()}"
        edge = Edge(
            edge_files(tmp_path / "edge", port=edge_port,
                       agents=[agent.address for agent in agents], trunk=trunk)
        )  # fmt: skip
        edge.address = f"127.0.0.1:{edge_port}"
        yield edge, agents
        edge.stop()
    finally:
        for agent in agents:
            agent.stop()


def message_call(edge, tmp_path, number, seconds: float, *, greeting_ms: int = 500):
    """A caller through the edge, answered by voicemail, who talks `seconds` after
    `greeting_ms` (by default a moment: the call is answered, its message no matter)."""
    return call_in(
        edge.address,
        tmp_path,
        "edge_caller",
        number.number,
        greeting_ms=greeting_ms,
        message_ms=int(seconds * 1000),
    )


def test_calls_spread_over_the_agents_and_a_drained_one_finishes_its_call(site, tmp_path, user):
    edge, (a, b) = site
    number = NumberFactory(owner=user)
    wait_until(lambda: probe(edge.address).startswith("SIP/2.0 200"), deadline=10,
               what="the edge to answer OPTIONS")  # fmt: skip

    # Two calls, one after the other: round-robin gives each agent one.
    for _ in range(2):
        caller = message_call(edge, tmp_path, number, 1)
        assert caller.finish(60) == 0, caller
    records = wait_for_records(number, 2)
    first_two = {tuple(edge.routed(record.sip_call_id)) for record in records}
    assert first_two == {(a.address,), (b.address,)}, edge.log_path.read_text()[-3000:]

    # A long call; its agent is drained in the middle of it.
    long_call = message_call(edge, tmp_path, number, MESSAGE_SECONDS, greeting_ms=5000)
    wait_until(lambda: len(edge.log_path.read_text().split("goes to agent")) > 3, deadline=10,
               what="the third call to be routed")  # fmt: skip
    busy = a if a.address in edge.log_path.read_text().rsplit("goes to agent", 1)[1] else b
    other = b if busy is a else a
    busy.proc.send_signal(signal.SIGTERM)

    # Calls meanwhile all reach the other agent, whether by the probe or by failover on 503.
    for _ in range(3):
        caller = message_call(edge, tmp_path, number, 1)
        assert caller.finish(60) == 0, caller

    assert long_call.finish(60) == 0, long_call
    assert busy.proc.wait(timeout=30) == 0  # drained once its call had ended
    records = wait_for_records(number, 6)
    assert all(record.status == "answered" for record in records)
    first_pks = {record.pk for record in records[:2]}
    later = {record.sip_call_id: edge.routed(record.sip_call_id) for record in records[2:]}
    # The long call is the one later call the drained agent took; every other went on.
    on_busy = [call_id for call_id, agents in later.items() if agents[-1] == busy.address]
    assert len(on_busy) == 1, later
    kept = next(record for record in records if record.sip_call_id == on_busy[0])
    assert kept.pk not in first_pks
    assert kept.recording_seconds is not None, busy.log_path.read_text()[-4000:]
    assert abs(kept.recording_seconds - MESSAGE_SECONDS) <= 1, kept.recording_seconds
    assert sum(agents[-1] == other.address for agents in later.values()) == 3, later


def test_a_killed_agent_is_taken_out_by_the_probes(site, tmp_path, user):
    edge, (a, b) = site
    number = NumberFactory(owner=user)
    wait_until(lambda: probe(edge.address).startswith("SIP/2.0 200"), deadline=10,
               what="the edge to answer OPTIONS")  # fmt: skip
    a.kill()

    # The first call may still be sent to the dead agent (until a probe has found it out):
    # it is failed over after EDGE_NO_ANSWER_MS, before the caller hears anything.
    for _ in range(3):
        caller = message_call(edge, tmp_path, number, 1)
        assert caller.finish(60) == 0, caller

    records = wait_for_records(number, 3)
    assert all(record.status == "answered" for record in records)
    for record in records:
        assert edge.routed(record.sip_call_id)[-1] == b.address
    # By the last call, the probes had taken the dead agent out: it went straight to b.
    assert edge.routed(max(records, key=lambda r: r.created_at).sip_call_id) == [b.address]


def test_a_caller_over_tls_reaches_an_agent_through_the_edges_tls_listener(tmp_path, test_ca, user):
    # WITH_TLS, as relay-edge-local.cfg.example shows it: a TLS listener beside UDP. baresip
    # calls over TLS (its certificate of the test CA); the edge takes the call to the agent
    # over UDP, and voicemail answers it.
    edge_port, tls_port = free_udp_port(), free_dual_port()
    cert = test_ca.issue("edge", "127.0.0.1", "localhost")
    (tmp_path / "edge").mkdir()
    tls_cfg = tls_config(tmp_path / "edge" / "tls.cfg", cert=cert, ca=test_ca.cert)
    workdir = tmp_path / "agent"
    workdir.mkdir()
    env = sip_env(workdir, edge_port, INBOUND_RING_SECONDS=1)
    agent = AgentProcess(workdir, env)
    edge = None
    try:
        wait_until(lambda: probe(env["SIP_BIND"]).startswith("SIP/2.0 200"), deadline=30,
                   what="the agent to answer OPTIONS")  # fmt: skip
        config = edge_files(
            tmp_path / "edge",
            port=edge_port,
            agents=[env["SIP_BIND"]],
            trunk=f"127.0.0.1:{free_udp_port()}",
            extra=(
                "#!define WITH_TLS\n"
                f'#!define EDGE_TLS_CONFIG "{tls_cfg}"\n'
                "enable_tls=yes\n"
                f"listen=tls:127.0.0.1:{tls_port}\n"
            ),
        )
        edge = Edge(config)
        wait_until(lambda: tcp_listening(tls_port), deadline=10, what="the edge's TLS port")
        number = NumberFactory(owner=user, greeting="Hi.")
        leaf = test_ca.issue("tls-caller", "127.0.0.1", "localhost")
        caller = Baresip(
            tmp_path / "caller",
            number=CALLER,
            source=silence_wav(tmp_path / "quiet.wav", 4),
            transport="tls",
            tls=(test_ca.cert, leaf.bundle),
        )
        try:
            caller.command("dial", f"sip:{number.number}@127.0.0.1:{tls_port}")
            caller.wait_event("CALL_ESTABLISHED", deadline=20)
            caller.wait_event("CALL_CLOSED", deadline=30)  # at the WAV's end
        finally:
            caller.stop()
        [record] = wait_for_records(number, 1)
        assert (record.status, record.caller_num) == ("answered", CALLER)
        assert edge.arrived_over(record.sip_call_id) == ["tls"], edge.log()[-3000:]
        assert edge.routed(record.sip_call_id) == [env["SIP_BIND"]]
        assert caller.heard_seconds() > 0.5  # the greeting came back to it
    finally:
        if edge is not None:
            edge.stop()
        agent.stop()


def test_the_operators_walk_through_two_agents_under_runrelay_one_drained_one_killed(
    tmp_path, user
):
    """docs/operations.md followed on one host: runrelay with SIP_AGENTS=2 behind the shipped
    edge. Calls spread over both agents; agent 0 drained with the documented command and
    agent 1 killed are each started again by runrelay while Relay runs on; and once the edge's
    probes have both back, no call is refused and both agents take calls again."""
    from harness.live import RelayProcess
    from harness.ports import free_port
    from tests.telephony.test_drain import drain_command

    edge_port, first_agent_port = free_udp_port(), free_port(2)
    agents = [f"127.0.0.1:{first_agent_port}", f"127.0.0.1:{first_agent_port + 1}"]
    env = sip_env(tmp_path, edge_port, SIP_BIND=agents[0], SIP_AGENTS=2, INBOUND_RING_SECONDS=1)
    relay = RelayProcess(tmp_path, log=tmp_path / "relay.log", **env)
    edge = None
    try:
        for agent in agents:
            wait_until(lambda a=agent: probe(a).startswith("SIP/2.0 200"), deadline=60,
                       what=f"agent {agent} to answer OPTIONS")  # fmt: skip
        edge = Edge(
            edge_files(tmp_path / "edge", port=edge_port, agents=agents,
                       trunk=f"127.0.0.1:{free_udp_port()}")
        )  # fmt: skip
        edge.address = f"127.0.0.1:{edge_port}"
        wait_until(lambda: probe(edge.address).startswith("SIP/2.0 200"), deadline=10,
                   what="the edge to answer OPTIONS")  # fmt: skip
        number = NumberFactory(owner=user)
        placed = 0

        def calls_answered(count: int) -> list:
            nonlocal placed
            for _ in range(count):
                caller = message_call(edge, tmp_path, number, 1)
                assert caller.finish(60) == 0, caller  # answered, never refused
                placed += 1
            records = wait_for_records(number, placed)
            assert all(record.status == "answered" for record in records), records
            return records[placed - count :]  # oldest first: these calls'

        def back(agent: str, seen: int) -> bool:
            return edge.log().count(f"agent sip:{agent} is back") > seen

        def by_agent(records) -> set[str]:
            return {edge.routed(record.sip_call_id)[-1] for record in records}

        assert by_agent(calls_answered(2)) == set(agents), edge.log()[-3000:]

        # Agent 0 drained as the guide says: it exits, runrelay starts it again.
        pid_file = tmp_path / "telephony-agent-0.pid"
        first = pid_file.read_text().strip()
        backs = edge.log().count(f"agent sip:{agents[0]} is back")
        drained = drain_command(env, tmp_path)
        assert drained.returncode == 0, drained.stderr
        calls_answered(2)  # meanwhile: agent 1 takes them (a 503 fails them over)
        wait_until(lambda: pid_file.read_text().strip() not in ("", first), deadline=60,
                   what="runrelay to start agent 0 again")  # fmt: skip
        wait_until(lambda: back(agents[0], backs), deadline=30,
                   what="the edge to take agent 0 back")  # fmt: skip

        # Agent 1 killed: runrelay starts it again; calls meanwhile fail over to agent 0.
        pid_file = tmp_path / "telephony-agent-1.pid"
        first = pid_file.read_text().strip()
        backs = edge.log().count(f"agent sip:{agents[1]} is back")
        os.kill(int(first), signal.SIGKILL)
        calls_answered(2)
        wait_until(lambda: pid_file.read_text().strip() not in ("", first), deadline=60,
                   what="runrelay to start agent 1 again")  # fmt: skip
        wait_until(lambda: back(agents[1], backs), deadline=30,
                   what="the edge to take agent 1 back")  # fmt: skip

        # Failover settled: every call answered, and both agents take them again.
        assert by_agent(calls_answered(4)) == set(agents), edge.log()[-3000:]
        assert relay.proc.poll() is None  # Relay ran on throughout
        log = (tmp_path / "relay.log").read_text()
        assert "telephony agent 0 drained and exited; starting it again" in log
        assert "telephony agent 1 exited with status -9; starting it again" in log
    finally:
        if edge is not None:
            edge.stop()
        relay.stop()
