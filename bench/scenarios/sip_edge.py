"""Issue 42's scenarios: calls from the trunk (SIPp) through the shipped SIP edge
(deploy/kamailio/relay-edge.cfg, with its default probe interval and timeout) to two telephony
agents, each call answered by voicemail, the caller speaking SIPp's g711a.pcap as its message.
sip_edge_400 holds every call up at once and reports the edge's CPU per call; sip_edge_rolling
restarts both agents one after the other (drained, started again once drained, the next one
once the edge has the first back) under a steady 50 calls a minute."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psutil
from django.utils import timezone

from bench import fixtures, sip
from bench.procs import tree_cpu_seconds
from bench.report import Row
from bench.scenarios.common import Bench, sip_start
from calls.models import Call
from harness.kamailio import Edge, edge_files
from harness.live import wait_until
from harness.ports import udp_port_taken
from harness.sip import MESSAGE_SECONDS, Sipp, free_udp_port
from history.records import Record, history_calls, records

CALLER = "+447700900123"
SHIPPED_PROBE_SECONDS, SHIPPED_NO_ANSWER_MS = 5, 2000  # relay-edge.cfg's defaults
GREETING_MS = 3000  # the caller waits this long (ringing, greeting, beep) before it speaks


class EdgeSite:
    """Two agents of `capacity` calls each (voicemail after a second of ringing) behind the
    edge; the edge's trunk is a port nobody listens on (these calls only come in)."""

    def __init__(self, b: Bench, workdir: Path, *, capacity: int):
        self.workdir = workdir
        self.port = free_udp_port()
        self.agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{self.port}", count=2,
                                 capacity=capacity, INBOUND_RING_SECONDS="1")  # fmt: skip
        try:
            config = edge_files(workdir / "edge", port=self.port,
                                agents=[self.agents.address(n) for n in range(2)],
                                trunk=f"127.0.0.1:{free_udp_port()}",
                                probe_seconds=SHIPPED_PROBE_SECONDS,
                                no_answer_ms=SHIPPED_NO_ANSWER_MS)  # fmt: skip
            self.edge = Edge(config)
            self.edge.wait_started(lambda: udp_port_taken(self.port), deadline=20,
                                   what="the edge to listen")  # fmt: skip
            self.edge_ps = psutil.Process(self.edge.proc.pid)
        except BaseException:
            self.agents.stop()
            raise

    def callers(self, name: str, *, calls: int, extra: tuple[str, ...], message_ms: int):
        """One SIPp placing `calls` calls through the edge (its rate and limit in `extra`)."""
        return Sipp(self.workdir / name, "edge_caller", port=free_udp_port(),
                    calls=calls, timeout=900, remote=f"127.0.0.1:{self.port}",
                    service=fixtures.EDGE_NUMBER, caller=CALLER, extra=extra,
                    greeting_ms=GREETING_MS, message_ms=message_ms)  # fmt: skip

    def wait_in(self, agent: int, seen: tuple[int, int]) -> None:
        """Until the edge sends calls to `agent` again after its restart (`seen`: the times the
        edge had taken it out and back before): once a probe could have found it down (an
        interval and a probe's timeout after it started again), it has been taken back, or it
        was never taken out (drained and started between two probes)."""
        address, started = self.agents.address(agent), time.monotonic()
        outs, backs = seen
        settle = SHIPPED_PROBE_SECONDS + SHIPPED_NO_ANSWER_MS / 1000 + 1
        wait_until(
            lambda: (
                time.monotonic() - started > settle
                and (self.edge.outs(address) == outs or self.edge.backs(address) > backs)
            ),
            deadline=settle + SHIPPED_PROBE_SECONDS + 30,
            what=f"the edge to take agent {agent} back",
        )

    def edge_cpu(self) -> float:
        return tree_cpu_seconds([self.edge_ps])

    def routed(self) -> Counter:
        """How many INVITEs the edge sent each agent (failovers included)."""
        return Counter(
            line.rsplit("agent sip:", 1)[1].strip()
            for line in self.edge.log().splitlines()
            if "goes to agent sip:" in line or "failing INVITE over to agent sip:" in line
        )

    def stop(self) -> None:
        self.edge.stop()
        self.agents.stop()


def recorded(number, since: datetime) -> list[Record]:
    return records(history_calls().filter(number=number, created_at__gte=since))


def whole(record: Record, message_s: float) -> bool:
    """Answered, and its message recorded to the end (a call cut short records less)."""
    return (record.status == "answered" and bool(record.recording)
            and (record.recording_seconds or 0) >= message_s - 1)  # fmt: skip


def answered(number, since: datetime) -> int:
    return Call.objects.filter(
        number=number, direction="inbound", created_at__gte=since, answered_at__isnull=False
    ).count()


def peak_up(number, since: datetime) -> int:
    """The most calls at once between their answer and their end (the record's start and
    duration, whole seconds)."""
    ends = {r.sip_call_id: r.created_at + timedelta(seconds=r.duration or 0)
            for r in recorded(number, since)}  # fmt: skip
    edges = []
    for call in Call.objects.filter(number=number, direction="inbound", created_at__gte=since,
                                    answered_at__isnull=False):  # fmt: skip
        if call.sip_call_id in ends:
            edges += [(call.answered_at, 1), (ends[call.sip_call_id], -1)]
    up = peak = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        up += step
        peak = max(peak, up)
    return peak


def _start(b: Bench, name: str, *, capacity: int):
    """A clean slate for scenario `name`: no queued call, no worker, the number afresh, the
    site up. (number, site)."""
    workdir = sip_start(b, name)
    return fixtures.voicemail_number(), EdgeSite(b, workdir, capacity=capacity)


def sip_edge_400(b: Bench) -> None:
    """Every call placed within a few seconds (SIPp at 100 a second), all up together."""
    p = b.profile
    n = p.edge_calls
    number, site = _start(b, "sip_edge_400", capacity=n // 2 + 50)
    message_ms = round(max(MESSAGE_SECONDS, p.edge_talk_seconds) * 1000)
    try:
        since = timezone.now()
        (agents0, _), edge0, t0 = site.agents.cpu(), site.edge_cpu(), time.monotonic()
        callers = site.callers("callers", calls=n, message_ms=message_ms,
                               extra=("-l", str(n), "-r", "100"))  # fmt: skip
        status = sip.sipp_exit(callers, deadline=message_ms / 1000 + 120)
        wall = time.monotonic() - t0
        (agents1, _), edge1 = site.agents.cpu(), site.edge_cpu()
        routed = site.routed()
    finally:
        site.stop()
    records = wait_until(lambda: len(found := recorded(number, since)) >= n and found,
                         deadline=60, what=f"{n} records")  # fmt: skip
    message_s = MESSAGE_SECONDS
    kept = sum(1 for record in records if whole(record, message_s))
    lost = n - kept
    peak = peak_up(number, since)
    b.keep_logs = b.keep_logs or lost > 0 or status != 0
    edge_cpu = edge1 - edge0
    spread = ", ".join(f"{agent}: {count}" for agent, count in sorted(routed.items()))
    what = f"{n} calls at once through the edge to two agents"
    b.add(Row("sip_edge_400", f"{what}: answered and recorded whole", kept, "calls",
              target=f"{n}, 0 lost", met=lost == 0 and status == 0,
              server_cpu=(agents1 - agents0 + edge_cpu) / wall,
              note=f"{lost} lost; SIPp exited {status}; INVITEs per agent {spread}; each "
              f"caller speaks SIPp's g711a.pcap ({MESSAGE_SECONDS:.1f} s) after "
              f"{GREETING_MS} ms, and hangs up {message_ms / 1000:.0f} s later"))  # fmt: skip
    b.add(Row("sip_edge_400", f"{what}: answered calls up at once", peak, "calls",
              target=f">= {n}", met=peak >= n,
              note="from each call's answer to its end (its record's start and duration, "
              "whole seconds)"))  # fmt: skip
    b.add(Row("sip_edge_400", f"{what}: edge CPU per call", edge_cpu / n * 1000, "CPU ms",
              server_cpu=edge_cpu / wall,
              note=f"Kamailio's processes, {edge_cpu:.2f} s over {wall:.0f} s: its SIP only (the "
              f"media goes from caller to agent); the agents took "
              f"{(agents1 - agents0) / n * 1000:.0f} CPU ms a call"))  # fmt: skip


def sip_edge_rolling(b: Bench) -> None:
    """Calls at a steady rate; after a while agent 0 drains and starts again, then (once the
    edge's probe has it back) agent 1; the calls go on until SIPp has placed them all."""
    p = b.profile
    n = p.rolling_calls
    number, site = _start(b, "sip_edge_rolling", capacity=100)
    message_ms = round(MESSAGE_SECONDS * 1000)
    call_s = GREETING_MS / 1000 + MESSAGE_SECONDS
    drains = []
    try:
        since = timezone.now()
        callers = site.callers("callers", calls=n, message_ms=message_ms,
                               extra=("-r", str(p.rolling_per_minute), "-rp", "60000",
                                      "-l", "100"))  # fmt: skip
        # Calls up on both agents before the first restart.
        wait_until(lambda: answered(number, since) >= min(n, 4), deadline=call_s + 60,
                   what="the first calls' answers")  # fmt: skip
        for agent in range(2):
            address = site.agents.address(agent)
            seen = site.edge.outs(address), site.edge.backs(address)
            drains.append(site.agents.restart(agent, deadline=call_s + 60))
            site.wait_in(agent, seen)
        status = sip.sipp_exit(callers, deadline=n * 60 / p.rolling_per_minute + call_s + 120)
        routed, failovers = site.routed(), site.edge.log().count("failing INVITE over")
        outs = [site.edge.outs(site.agents.address(a)) for a in range(2)]
    finally:
        site.stop()
    records = wait_until(lambda: len(found := recorded(number, since)) >= n and found,
                         deadline=60, what=f"{n} records")  # fmt: skip
    kept = sum(1 for record in records if whole(record, MESSAGE_SECONDS))
    lost = n - kept
    b.keep_logs = b.keep_logs or lost > 0 or status != 0
    spread = ", ".join(f"{agent}: {count}" for agent, count in sorted(routed.items()))
    b.add(Row("sip_edge_rolling", f"calls dropped or failed while both agents restart, one after "
              f"the other, under {p.rolling_per_minute} calls a minute", lost, "calls",
              target="0", met=lost == 0 and status == 0,
              note=f"{n} calls of {call_s:.0f} s; SIPp exited {status}; the drains took "
              f"{', '.join(f'{s:.1f}' for s in drains)} s; the edge took the agents out "
              f"{outs[0]} and {outs[1]} times and failed {failovers} INVITEs over; INVITEs "
              f"per agent {spread}"))  # fmt: skip
