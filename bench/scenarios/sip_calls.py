"""sip_50_calls: real calls over SIP from several telephony agents to SIPp, submitted over the
WebSocket as a client would, with their cost, their concurrency and the latency from call_ack to
INVITE with the TTS cache cold and warm."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass

from bench import sip, sipp_log
from bench.report import Row
from bench.scenarios.common import Bench, relay_urls, sip_start
from bench.stats import percentile
from bench.wsload import ClientGroup
from harness.sip import Sipp, free_udp_port

WARM_UP_PER_AGENT = 2


@dataclass
class LoadRun:
    """sip_50_calls's calls all at once, as the harness saw them."""

    prefix: str
    acks: dict  # callId -> wall-clock time its call_ack arrived
    samples: list  # sip.Sample every 0.2 s until the calls ended
    idle_rss: int
    own_cpu: float  # the agents' CPU seconds during the run
    tts_cpu: float  # of the espeak-ng and sox runs they started
    wall: float
    client_cpu: float  # SIPp's and the WebSocket client's, per wall second


def sip_50_calls(b: Bench) -> None:
    p = b.profile
    # ws_call_acks and ws_status_push leave queued calls behind: the agents would dial them
    workdir = sip_start(b, "sip_50_calls")
    prefix = f"sip_50_calls-{int(time.time())}"
    trunk = free_udp_port()
    total = WARM_UP_PER_AGENT * p.sip_50_agents + p.sip_50_calls + 2 * p.sip_50_latency_calls
    far_end = Sipp(workdir / "sipp", "uas", port=trunk, calls=total, echo=True, timeout=300)
    agents = None
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{trunk}", count=p.sip_50_agents,
                            capacity=p.sip_50_agent_calls)  # fmt: skip
        # One client process: each RUN sends exactly the calls it is given.
        urls = relay_urls(b, min(10, len(b.ws)))
        with ClientGroup(urls, 1, {"mode": "submit"}, deadline=900) as group:
            group.ready(timeout=60)
            _sip_50_warm_up(b, group, agents, f"{prefix}-warm-")
            load = _sip_50_load(b, group, agents, far_end, f"{prefix}-load-")
            acks = _sip_50_repeats(b, group, prefix)
            sip.watch(prefix, total, agents, deadline=120)
        sipp_status = sip.sipp_exit(far_end, deadline=60)
        audio = agents.ended_calls()
    finally:
        if agents is not None:
            agents.stop()
        far_end.stop()
    calls = sip.placed(prefix)
    invites = sipp_log.invites(far_end.messages)
    peak = _sip_50_concurrency_rows(b, load, calls, invites, audio, sipp_status)
    _sip_50_cost_rows(b, load, peak)
    _sip_50_latency_rows(b, load, acks, calls, invites)
    _sip_50_render_rows(b)


def _sip_50_warm_up(b: Bench, group: ClientGroup, agents, prefix: str) -> None:
    """A few short calls, not measured, so that no figure pays an agent's first call (lazy
    imports, its first database connection and threads, espeak-ng from a cold disk cache)."""
    count = WARM_UP_PER_AGENT * b.profile.sip_50_agents
    calls = [{"callId": f"{prefix}{i}", "message": sip.message(f"warm up {i}", 0)}
             for i in range(count)]  # fmt: skip
    group.run({"calls": calls}, timeout=60)
    sip.watch(prefix, count, agents, deadline=60)


def _sip_50_load(b: Bench, group: ClientGroup, agents, far_end, prefix: str) -> LoadRun:
    """Every call at once, each with a message of its own; sampled until all have ended."""
    p = b.profile
    calls = [{"callId": f"{prefix}{i}", "message": sip.message(f"load {i}", p.sip_50_sentences)}
             for i in range(p.sip_50_calls)]  # fmt: skip
    idle_rss = agents.rss()
    sipp = far_end.proc.pid
    (own0, tts0), sipp0, started = agents.cpu(), sip.cpu_seconds(sipp), time.monotonic()
    run = group.run({"calls": calls}, timeout=60)
    samples = sip.watch(prefix, p.sip_50_calls, agents, deadline=120)
    (own1, tts1), sipp1, wall = agents.cpu(), sip.cpu_seconds(sipp), time.monotonic() - started
    client_cpu = (sipp1 - sipp0 + run.client_cpu * run.wall) / wall
    return LoadRun(prefix, dict(run.merged("acked_at")), samples, idle_rss, own1 - own0,
                   tts1 - tts0, wall, client_cpu)  # fmt: skip


def _sip_50_repeats(b: Bench, group: ClientGroup, prefix: str) -> dict[str, dict]:
    """Round `miss`: texts no call has used; round `hit`: the same texts again. A few calls at
    a time, the next batch once these were dialed, so the agents claim each at once."""
    p = b.profile
    texts = [sip.message(f"repeat {i}", p.sip_50_sentences) for i in range(p.sip_50_latency_calls)]
    acks: dict[str, dict] = {}
    for kind in ("miss", "hit"):
        calls = [{"callId": f"{prefix}-{kind}-{i}", "message": t} for i, t in enumerate(texts)]
        acks[kind] = {}
        for first in range(0, len(calls), p.sip_50_latency_batch):
            batch = calls[first : first + p.sip_50_latency_batch]
            acks[kind].update(group.run({"calls": batch}, timeout=60).merged("acked_at"))
            sip.wait_dialed([c["callId"] for c in batch], deadline=60)
    return acks


def _ack_to_invite_ms(acks: dict, calls: dict, invites: dict) -> list[float]:
    """Per acked call: SIPp's receipt of its first INVITE minus the client's receipt of its
    call_ack, matched by the Call-ID the agent recorded when it claimed the call."""
    out = []
    for call_id, acked_at in acks.items():
        call = calls.get(call_id)
        invite = invites.get(call.sip_call_id) if call else None
        if invite is not None:
            out.append((invite.at - acked_at) * 1000)
    return out


def _sip_50_concurrency_rows(b: Bench, load: LoadRun, calls: dict, invites: dict, audio: dict,
                         sipp_status: int | None) -> int:  # fmt: skip
    """The peak of calls in progress together, and the calls lost; returns the peak."""
    p = b.profile
    n = p.sip_50_calls
    mine = [c for call_id, c in calls.items() if call_id.startswith(load.prefix)]
    completed = [c for c in mine if c.status == "completed"]
    dialed = {c.sip_call_id for c in mine} & invites.keys()
    lost = n - sum(1 for c in completed if c.sip_call_id in invites)
    unknown = len(invites.keys() - {c.sip_call_id for c in calls.values()})
    per_agent = Counter(invites[call_id].sender for call_id in dialed)
    split = "/".join(str(count) for _, count in sorted(per_agent.items()))
    heard = [audio[c.pk]["speech"] for c in mine if c.pk in audio]
    peak = sip.peak_in_progress(mine)
    polled = max((s.in_progress for s in load.samples), default=0)
    b.add(
        Row(
            "sip_50_calls",
            f"answered calls in progress at once, {n} submitted at once",
            peak,
            "calls",
            target=f">= {n}",
            met=peak >= n,
            server_cpu=(load.own_cpu + load.tts_cpu) / load.wall,
            client_cpu=load.client_cpu,
            note=f"{p.sip_50_agents} agents x {p.sip_50_agent_calls}, placed {split}; polled every "
            f"0.2 s: {polled}",
        )
    )
    b.add(
        Row(
            "sip_50_calls",
            "calls lost: not completed, or no INVITE at SIPp",
            lost,
            "lost",
            target="0",
            met=lost == 0 and not unknown,
            note=f"{len(completed)} of {n} completed; SIPp saw {len(dialed)} of their "
            f"Call-IDs, {len(invites)} distinct INVITE Call-IDs in all sip_50_calls and {unknown} "
            f"unknown to the database; SIPp exit {sipp_status}; {sum(x > 0 for x in heard)} "
            f"calls heard echoed speech, median "
            f"{statistics.median(heard) if heard else math.nan:.1f} s",
        )
    )
    return peak


def _sip_50_cost_rows(b: Bench, load: LoadRun, peak: int) -> None:
    p = b.profile
    cpu = load.own_cpu + load.tts_cpu
    b.add(Row("sip_50_calls", "agents' CPU per call", cpu / p.sip_50_calls * 1000, "CPU ms",
              server_cpu=cpu / load.wall,
              note=f"{load.tts_cpu / p.sip_50_calls * 1000:.0f} ms of it espeak-ng and sox; "
              f"{cpu:.1f} s over {load.wall:.0f} s"))  # fmt: skip
    up_cpu, up, span = sip.cpu_while_up(load.samples)
    b.add(
        Row(
            "sip_50_calls",
            f"agents' CPU while {up} calls are up (100% = one core)",
            up_cpu * 100,
            "%",
            server_cpu=up_cpu,
            note=f"over {span:.1f} s",
        )
    )
    peak_rss = max((s.rss for s in load.samples), default=load.idle_rss)
    per_call = (peak_rss - load.idle_rss) / max(peak, 1) / 1024
    b.add(Row("sip_50_calls", "agents' RSS per concurrent call (peak - idle)", per_call, "KiB",
              note=f"idle {load.idle_rss / 2**20:.0f} MiB, peak {peak_rss / 2**20:.0f} MiB, "
              f"{p.sip_50_agents} agents"))  # fmt: skip


def _sip_50_latency_rows(b: Bench, load: LoadRun, acks: dict, calls: dict, invites: dict) -> None:
    p = b.profile
    lat = _ack_to_invite_ms(load.acks, calls, invites)
    b.add(Row("sip_50_calls", f"call_ack to INVITE, {p.sip_50_calls} at once (TTS misses): p95",
              percentile(lat, 95), "ms",
              note=f"p50 {percentile(lat, 50):.0f} ms, max {percentile(lat, 100):.0f} ms; "
              f"{len(lat)} calls"))  # fmt: skip
    lat = {kind: _ack_to_invite_ms(acks[kind], calls, invites) for kind in ("miss", "hit")}
    how = f"{p.sip_50_latency_batch} at a time"
    for label, stat in (("p50", 50), ("p95", 95), ("max", 100)):
        miss, hit = percentile(lat["miss"], stat), percentile(lat["hit"], stat)
        b.add(Row("sip_50_calls", f"call_ack to INVITE, TTS cache miss: {label}", miss, "ms",
                  note=f"{len(lat['miss'])} calls, {how}" if stat == 50 else ""))  # fmt: skip
        target = stat == 95
        b.add(Row("sip_50_calls", f"call_ack to INVITE, TTS cache hit: {label}", hit, "ms", miss,
                  "cache miss", "<= 100 ms" if target else "", (hit <= 100) if target else None,
                  note=f"{len(lat['hit'])} calls, {how}" if stat == 50 else ""))  # fmt: skip


def _sip_50_render_rows(b: Bench) -> None:
    p = b.profile
    texts = [sip.message(f"render {i}", p.sip_50_sentences) for i in range(p.sip_50_render_texts)]
    r = sip.render_ms(texts)
    miss = statistics.median(r["miss"])
    hits, misses = r["counters"]
    spoken = statistics.median(r["audio_s"])
    b.add(Row("sip_50_calls", "Speech.render in-process, new text (miss): median", miss, "ms",
              note=f"{len(texts)} texts speaking {spoken:.1f} s each"))  # fmt: skip
    b.add(Row("sip_50_calls", "Speech.render, same text again (memory hit): median",
              statistics.median(r["memory"]), "ms", miss, "miss",
              note=f"Speech counters: {hits} hits, {misses} misses"))  # fmt: skip
    b.add(
        Row(
            "sip_50_calls",
            "Speech.render, same text, new Speech on that cache (file hit): median",
            statistics.median(r["file"]),
            "ms",
            miss,
            "miss",
        )
    )
