"""Relay across hosts (issue 42), on one machine: network namespaces on a bridge of the test's
own stand in for four hosts (harness/netns.py).

- hosts `a` and `b` each run what docs/operations.md's systemd units run: gunicorn, Daphne, the
  task worker and one telephony agent;
- `edge` runs the shipped SIP edge (deploy/kamailio/relay-edge.cfg) in front of both agents;
- `carrier` is the trunk: SIPp callers, SIPp answering the agents' own calls, and a sniffer of
  the packets it receives (harness/rtp_sources.py), which tells where audio really came from.

PostgreSQL and Redis are the machine's, reached from every host through the bridge's own
address. Recordings go to one directory both hosts' storage writes and reads (what NFS gives
real hosts). The PostgreSQL + Redis pass runs it; it needs root (CI is).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection
from websockets.sync.client import connect

from accounts import services as accounts
from calls.models import Call
from harness.kamailio import EDGE_NO_ANSWER_MS, EDGE_PROBE_SECONDS, Edge
from harness.kamailio import edge_files as shipped_edge_files
from harness.live import ROOT, ChildProcess, relay_env, wait_until
from harness.live import test_database_url as database_url
from harness.netns import Forwarder, Sandbox, sandbox_missing
from harness.sip import MESSAGE_SECONDS, Sipp
from history.records import Record
from tests.factories import NumberFactory
from tests.telephony.conftest import call_in, records_of
from tests.telephony.test_drain import probe

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"),
        reason="hosts share PostgreSQL and Redis: the PostgreSQL + Redis pass runs it",
    ),
    pytest.mark.skipif(
        bool(sandbox_missing()) and not os.environ.get("CI"), reason=sandbox_missing() or ""
    ),
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

SIP_PORT = 5060
HTTP_PORT, WS_PORT = 8000, 8001
TRUNK = "+441134960200"  # what the agents' own calls dial: the carrier answers it
GREETING = "Hi."  # short, so that a caller's message starts soon
AFTER_GREETING_MS = 2500  # a caller speaks this long after the answer: past the greeting's beep


def reachable_through(url: str, gateway: str) -> tuple[str, tuple[str, int], tuple[str, int]]:
    """`url` (a loopback service's) as the sandbox's hosts reach it, on `gateway`: (that URL,
    the address to listen on, the service's own address)."""
    parts = urlsplit(url)
    port = parts.port
    netloc = parts.netloc.rsplit("@", 1)
    userinfo = f"{netloc[0]}@" if len(netloc) == 2 else ""
    moved = urlunsplit(parts._replace(netloc=f"{userinfo}{gateway}:{port}"))
    return moved, (gateway, port), (parts.hostname, port)


class HostRelay:
    """One host's Relay as the systemd units of docs/operations.md run it, each process in the
    host's namespace: gunicorn, Daphne, the worker, and telephony agent 0."""

    def __init__(self, host, workdir: Path, env: dict):
        self.host, self.workdir, self.env = host, workdir, env
        self.sip = f"{host.address}:{SIP_PORT}"
        self.base = f"http://{host.address}:{HTTP_PORT}"
        self.ws_base = f"ws://{host.address}:{WS_PORT}"
        python = sys.executable
        self.processes = [
            self._start("web", [python, "-m", "gunicorn", "-c", "python:relay.gunicorn_conf",
                                "-b", f"{host.address}:{HTTP_PORT}", "relay.wsgi:application"]),
            self._start("socket", [python, "-m", "relay.platform.daphne_server", "-b", host.address,
                                   "-p", str(WS_PORT), "-v", "0", "relay.asgi:application"]),
            self._start("worker", [python, "manage.py", "relay_worker", "--no-reload",
                                   "--queue-name", "default", "--interval", "0.05"]),
        ]  # fmt: skip
        self.agent = self.start_agent()
        self.processes[0].wait_serving(f"{self.base}/healthz", what=f"{host.name}'s gunicorn")
        self.processes[1].wait_serving(
            f"http://{host.address}:{WS_PORT}/healthz", what=f"{host.name}'s Daphne"
        )

    def _start(self, name: str, argv: list[str]) -> ChildProcess:
        return ChildProcess(self.host.command(argv), self.env, log=self.workdir / f"{name}.log")

    def start_agent(self) -> ChildProcess:
        argv = [sys.executable, "manage.py", "telephony_agent", "--index", "0"]
        agent = self._start("agent", argv)
        agent.stop_grace = 10
        return agent

    def manage(self, *argv: str) -> subprocess.CompletedProcess:
        """`manage.py argv...` on this host, with its environment, as an operator runs it."""
        return subprocess.run(  # noqa: S603 - our own command
            self.host.command([sys.executable, "manage.py", *argv]),
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def stop(self) -> None:
        for process in [self.agent, *reversed(self.processes)]:
            process.stop()


class Site:
    def __init__(self, workdir: Path):
        self.sandbox = Sandbox(["a", "b", "edge", "carrier"])
        hosts = self.sandbox.hosts
        self.carrier, self.edge_host = hosts["carrier"], hosts["edge"]
        self.forwarders: list[Forwarder] = []
        self.relays: list[HostRelay] = []
        self.shared = workdir / "recordings"  # every host's recordings storage
        self.shared.mkdir()
        database, listen, target = reachable_through(database_url(), self.sandbox.gateway)
        self.forwarders.append(Forwarder(listen, target))
        redis, listen, target = reachable_through(os.environ["REDIS_URL"], self.sandbox.gateway)
        self.forwarders.append(Forwarder(listen, target))
        self.edge_sip = f"{self.edge_host.address}:{SIP_PORT}"
        for name in ("a", "b"):
            host = hosts[name]
            host_dir = workdir / name
            (host_dir / "metrics").mkdir(parents=True)
            env = relay_env(
                host_dir,
                DATABASE_URL=database,
                REDIS_URL=redis,
                ALLOWED_HOSTS=f"{host.address},127.0.0.1,localhost",
                PUBLIC_URL=f"http://{host.address}:{HTTP_PORT}",
                PROMETHEUS_MULTIPROC_DIR=host_dir / "metrics",
                TELEPHONY_PROVIDER="sip",
                SIP_BIND=f"{host.address}:{SIP_PORT}",
                SIP_TRUNK_URI=f"sip:{self.edge_sip}",
                RTP_PORT_RANGE="20000-20999",
                SIP_RING_TIMEOUT=5,
                INBOUND_RING_SECONDS=1,
                TTS_CACHE_DIR=host_dir / "tts",
                RECORDING_STORAGE_OPTIONS=json.dumps({"location": str(self.shared)}),
            )
            self.relays.append(HostRelay(host, host_dir, env))
        self.a, self.b = self.relays
        self.answering = Sipp(workdir / "carrier-uas", "uas", port=SIP_PORT, echo=True,
                              calls=1000, timeout=600, host=self.carrier)  # fmt: skip
        self.sources = workdir / "rtp-sources.txt"
        self.sniffer = ChildProcess(
            self.carrier.command([sys.executable, str(ROOT / "harness" / "rtp_sources.py"),
                                  str(self.sources)]),
            dict(os.environ), log=workdir / "sniffer.log",
        )  # fmt: skip
        wait_until(lambda: self.sources.exists() and "listening" in self.sources.read_text(),
                   deadline=10, what="the carrier's sniffer")  # fmt: skip
        for relay in self.relays:  # the edge starts with every agent in: they must be up
            wait_until(lambda r=relay: self.up(r.sip), deadline=60,
                       what=f"{relay.host.name}'s agent to answer OPTIONS")  # fmt: skip
        config = shipped_edge_files(
            workdir / "edge",
            port=SIP_PORT,
            address=self.edge_host.address,
            agents=[relay.sip for relay in self.relays],
            trunk=f"{self.carrier.address}:{SIP_PORT}",
        )
        self.edge = Edge(config, host=self.edge_host)
        wait_until(lambda: self.up(self.edge_sip), deadline=10, what="the edge to answer OPTIONS")

    def up(self, sip: str) -> bool:
        """Whether `sip` (host:port in the sandbox) answers an OPTIONS with 200."""
        return probe(sip, source=self.sandbox.gateway).startswith("SIP/2.0 200")

    def wait_back(self, relay: HostRelay, backs: int) -> None:
        """Until the edge's probes have brought `relay`'s agent back more than `backs` times."""
        wait_until(lambda: self.edge.backs(relay.sip) > backs, deadline=30,
                   what=f"the edge to take {relay.host.name}'s agent back")  # fmt: skip

    def call(self, workdir: Path, number, *, seconds: float, greeting_ms: int = 500) -> Sipp:
        """A caller on the carrier through the edge, answered by voicemail; talks `seconds`."""
        return call_in(
            self.edge_sip,
            workdir,
            "edge_caller",
            number.number,
            host=self.carrier,
            greeting_ms=greeting_ms,
            message_ms=int(seconds * 1000),
        )

    def rtp_sources(self, media_port: int) -> set[tuple[str, int]]:
        """(address, port) of every sender of UDP to the carrier's `media_port`."""
        found = set()
        for line in self.sources.read_text().splitlines()[1:]:
            address, port, destination = line.split()
            if int(destination) == media_port:
                found.add((address, int(port)))
        return found

    def stop(self) -> None:
        for process in (getattr(self, name, None) for name in ("edge", "answering", "sniffer")):
            if process is not None:
                process.stop()
        for relay in self.relays:
            relay.stop()
        for forwarder in self.forwarders:
            forwarder.close()
        self.sandbox.destroy()


@pytest.fixture(scope="module")
def site(tmp_path_factory, django_db_setup):
    site = None
    try:
        site = Site(tmp_path_factory.mktemp("hosts"))
        yield site
    finally:
        if site is not None:
            site.stop()


def answer_media(sipp: Sipp) -> tuple[str, int]:
    """The (address, port) of the audio in the 200 OK SIPp received (the agent's SDP)."""
    text = sipp.messages.read_text(errors="replace")
    for block in text.split("message received")[1:]:
        if "SIP/2.0 200" in block and "m=audio" in block:
            address = block.split("c=IN IP4 ", 1)[1].split()[0]
            port = int(block.split("m=audio ", 1)[1].split()[0])
            return address, port
    raise AssertionError(f"no answer with SDP: {sipp!r}")


def recording_bytes(base: str, token: str, record: Record) -> bytes:
    request = urllib.request.Request(f"{base}/api/history/{record.pk}/recording")  # noqa: S310
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.headers["Content-Type"] == "audio/wav"
        return response.read()


def test_calls_spread_over_the_hosts_each_with_its_agents_own_media_and_play_on_either(
    site, tmp_path, user
):
    number = NumberFactory(owner=user, greeting=GREETING)
    callers = []
    for _ in range(4):
        caller = site.call(tmp_path, number, seconds=2, greeting_ms=AFTER_GREETING_MS)
        assert caller.finish(60) == 0, caller
        callers.append(caller)

    records = wait_until(lambda: len(found := records_of(number)) >= 4 and found, deadline=30,
                         what="four records")  # fmt: skip
    assert [record.status for record in records] == ["answered"] * 4
    took = {}
    for caller, record in zip(callers, records, strict=True):
        routed = site.edge.routed(record.sip_call_id)
        assert len(routed) == 1, site.edge.log()[-3000:]  # straight to a healthy agent
        agent_address = routed[0].split(":")[0]
        took[record.pk] = agent_address
        # The agent that took the call speaks its media itself, from the address it offered.
        offered = answer_media(caller)
        assert offered[0] == agent_address, (offered, routed)
        assert site.rtp_sources(caller.media_port) == {offered}
    assert sorted(took.values()) == sorted([site.a.host.address, site.b.host.address] * 2)

    # A message one host's agent recorded, played through the other host's API.
    token = accounts.session_open(user=user).token
    for record in records:
        other = site.b if took[record.pk] == site.a.host.address else site.a
        played = recording_bytes(other.base, token, record)
        assert played == (site.shared / record.recording).read_bytes()
        assert len(played) > 8000  # a second of 8 kHz audio at least


def test_a_socket_on_one_host_follows_a_call_placed_through_the_other(site, user):
    token = accounts.session_open(user=user).token
    with connect(f"{site.b.ws_base}/ws?token={token}", open_timeout=10) as ws:
        body = json.dumps({"callId": "across", "to": TRUNK, "message": "Hello from host a."})
        request = urllib.request.Request(  # noqa: S310 - the sandbox's host a
            f"{site.a.base}/api/calls", data=body.encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            assert response.status == 202
        statuses = []
        deadline = time.monotonic() + 60
        while "completed" not in statuses and time.monotonic() < deadline:
            frame = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if frame.get("type") == "call_status" and frame.get("callId") == "across":
                statuses.append(frame["status"])
    assert statuses[-1] == "completed", statuses
    assert {"dialing", "in_progress"} <= set(statuses), statuses
    call = Call.objects.get(owner=user, call_id="across")
    assert call.status == "completed"
    # The carrier saw the call come through the edge, once.
    assert site.answering.invites().count(call.sip_call_id) == 1


def test_a_drained_agent_finishes_its_call_returns_and_a_killed_one_is_taken_out(
    site, tmp_path, user
):
    number = NumberFactory(owner=user, greeting=GREETING)

    # A long call; the agent that took it is drained (SIGTERM, as `systemctl stop` sends it;
    # tests/telephony/test_drain.py has the operator's `telephony_agent --drain`).
    long_call = site.call(tmp_path, number, seconds=MESSAGE_SECONDS, greeting_ms=AFTER_GREETING_MS)
    wait_until(lambda: _answered(long_call), deadline=20, what="the long call's answer")
    busy_address = answer_media(long_call)[0]
    busy = site.a if busy_address == site.a.host.address else site.b
    other = site.b if busy is site.a else site.a
    outs_before, backs_before = site.edge.outs(busy.sip), site.edge.backs(busy.sip)
    busy.agent.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: site.edge.outs(busy.sip) > outs_before, deadline=10,
               what="the edge to take the draining agent out")  # fmt: skip
    # Calls meanwhile go to the other host's agent and succeed.
    for _ in range(2):
        caller = site.call(tmp_path, number, seconds=1)
        assert caller.finish(60) == 0, caller
        assert answer_media(caller)[0] == other.host.address
    assert long_call.finish(60) == 0, long_call
    assert busy.agent.proc.wait(timeout=30) == 0  # it exited of its own accord, once drained
    records = wait_until(lambda: len(found := records_of(number)) >= 3 and found, deadline=30,
                         what="three records")  # fmt: skip
    kept = min(records, key=lambda record: record.created_at)  # the long call, whole
    assert kept.status == "answered"
    assert abs(kept.recording_seconds - MESSAGE_SECONDS) <= 1, kept.recording_seconds

    # It returns (the upgrade's last step): the next probe takes it back in.
    busy.agent = busy.start_agent()
    site.wait_back(busy, backs_before)

    # The other agent is SIGKILLed: the probes take it out within a probe's interval and its
    # timeout (docs/operations.md), and calls keep succeeding on the returned agent.
    outs_before = site.edge.outs(other.sip)
    other.agent.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(lambda: site.edge.outs(other.sip) > outs_before, deadline=30,
               what="the edge to take the killed agent out")  # fmt: skip
    taken_out_after = time.monotonic() - killed_at
    assert taken_out_after <= EDGE_PROBE_SECONDS + EDGE_NO_ANSWER_MS / 1000 + 2, taken_out_after
    for _ in range(2):
        caller = site.call(tmp_path, number, seconds=1)
        assert caller.finish(60) == 0, caller
        assert answer_media(caller)[0] == busy.host.address
    other.agent.proc.wait(timeout=10)
    backs_before = site.edge.backs(other.sip)
    other.agent = other.start_agent()  # the site as it was, for whatever runs next
    site.wait_back(other, backs_before)


def _answered(sipp: Sipp) -> bool:
    text = sipp.messages.read_text(errors="replace") if sipp.messages.exists() else ""
    return "SIP/2.0 200" in text and "m=audio" in text
