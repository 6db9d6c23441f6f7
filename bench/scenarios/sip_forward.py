"""Issue 28's scenarios: calls to a number that forwards, bridged by one agent (bench/forward.py
places them). sip_forward_cpu sets a bridged call's cost beside a played-message call's leg;
sip_forward_100 holds every bridge up at once and times each packet's pass through the agent."""

from __future__ import annotations

import math
import time

from bench import fixtures, forward, sip
from bench.report import Row
from bench.scenarios.common import Bench, alternated, sip_start
from bench.scenarios.sip_legs import Leg, legs_note, sip_leg
from bench.stats import percentile


def sip_forward_cpu(b: Bench) -> None:
    """The agent's CPU per bridged (forwarded) call against its CPU per played-message
    outbound call (sip_tls_srtp_cpu's plain UDP leg): the same number of calls at once and the
    same talk, for the bridged callers say the very message the outbound calls play, and
    hang up when it ends; legs alternated (outbound, bridged, bridged, outbound, ...)."""
    p = b.profile
    workdir = sip_start(b, "sip_forward_cpu")
    stamp = int(time.time())
    n = p.forward_cost_calls
    number = fixtures.forwarding_number()
    pcap, talk = forward.message_pcap(workdir, sip.message("cost", p.forward_cost_sentences))
    outbound: list[Leg] = []
    bridged: list[forward.Bridges] = []
    for r, kind in alternated(p.forward_cost_rounds, "outbound", "bridged"):
        name = f"{kind}-{r}"
        if kind == "outbound":
            outbound.append(sip_leg(b, workdir / name, f"fwdcost-{stamp}-{name}-",
                                     secure=False, calls=n, sentences=p.forward_cost_sentences,
                                     deadline=120))  # fmt: skip
        else:
            bridged.append(forward.bridges(b, workdir / name, number, calls=n,
                                           talk_ms=round(talk * 1000), capacity=2 * n,
                                           target_codec=forward.PCMU, echo=True,
                                           caller_play=forward.play(pcap),
                                           deadline=120))  # fmt: skip
    calls = sum(leg.calls for leg in outbound)
    cpu, wall = sum(leg.agent_cpu for leg in outbound), sum(leg.wall for leg in outbound)
    load = sum(leg.sipp_cpu + leg.client_cpu for leg in outbound) / wall
    base = cpu / calls * 1000
    legs = f"{n} calls at once, {len(outbound)} leg{'s' if len(outbound) != 1 else ''} each"
    b.add(Row("sip_forward_cpu", "agent CPU per played-message outbound call, plain UDP (the "
              "baseline)", base, "CPU ms", server_cpu=cpu / wall, client_cpu=load,
              note=f"{legs}; the {talk:.1f} s message played to SIPp, which echoes it; "
              f"{legs_note(outbound)}"))  # fmt: skip
    calls = sum(run.calls for run in bridged)
    cpu, wall = sum(run.agent_cpu for run in bridged), sum(run.wall for run in bridged)
    per_call = cpu / calls * 1000
    lost = sum(run.lost for run in bridged)
    b.add(Row("sip_forward_cpu", "agent CPU per bridged (forwarded) call", per_call, "CPU ms",
              base, "played-message call, same calls and talk", "<= 2x the played-message call",
              per_call <= 2 * base and lost == 0, cpu / wall,
              sum(run.load_cpu for run in bridged) / wall,
              note=f"{legs}; each caller (SIPp, PCMA) says the same message in 20 ms packets "
              "and hangs up when it ends, the target (SIPp, PCMU, so transcoded both ways) "
              f"echoes what it hears; {forward.runs_note(bridged)}"))  # fmt: skip
    lost_out = sum(leg.lost for leg in outbound)
    b.keep_logs = b.keep_logs or lost > 0  # the agents' and SIPps' logs say what went wrong
    b.add(Row("sip_forward_cpu", "calls lost: not completed, or not bridged and recorded",
              lost + lost_out, "lost", target="0", met=lost + lost_out == 0,
              note=f"{lost_out} played-message, {lost} bridged"))  # fmt: skip


FORWARD_CAPACITY = 250  # SIP_MAX_CONCURRENT_CALLS of sip_forward_100's agent: a bridge takes 2


def sip_forward_100(b: Bench) -> None:
    """One agent given every forwarded call at once (SIPp places them within a second, to a
    number forwarding to one target, SIPp again), all bridged and up together; bench/
    rtpmeter.py is both ends' media and times each packet's pass through the agent."""
    p = b.profile
    workdir = sip_start(b, "sip_forward_100")
    n = p.forward_many_bridges
    talk = p.forward_many_talk_seconds
    number = fixtures.forwarding_number()
    floor = forward.meter_floor(workdir / "floor", legs=n, seconds=p.forward_floor_seconds)
    run = forward.bridges(b, workdir / "bridges", number, calls=n, talk_ms=round(talk * 1000),
                          capacity=max(FORWARD_CAPACITY, 2 * n), target_codec=forward.PCMA,
                          echo=False, meter_seconds=talk - 1.5, deadline=180)  # fmt: skip
    b.keep_logs = b.keep_logs or run.lost > 0
    what = f"{n} forwarded calls at once on one agent"
    b.add(Row("sip_forward_100", f"{what}: calls bridged and completed", run.bridged, "calls",
              target=f"{n}", met=run.bridged == n and run.lost == 0,
              server_cpu=run.agent_cpu / run.wall, client_cpu=run.load_cpu / run.wall,
              note=f"{run.lost} lost; {forward.runs_note([run])}"))  # fmt: skip
    b.add(Row("sip_forward_100", f"{what}: bridges up at once", run.peak, "bridges",
              target=f">= {n}", met=run.peak >= n,
              note=f"polled every 0.2 s: {run.polled}; the last bridged "
              f"{run.last_bridge:.1f} s after the callers started, each held "
              f"{talk:.0f} s"))  # fmt: skip
    _forward_delay_rows(b, run, floor, n)
    up_cpu, up, span = sip.cpu_while_up(run.samples)
    b.add(Row("sip_forward_100", f"{what}: agent CPU while {up} bridges are up (100% = one "
              "core)", up_cpu * 100, "%", server_cpu=up_cpu,
              note=f"over {span:.1f} s; {run.agent_cpu / n * 1000:.0f} CPU ms per bridged call "
              f"over the whole run ({run.agent_cpu:.1f} s in {run.wall:.0f} s)"))  # fmt: skip
    peak_rss = max((s.rss for s in run.samples), default=run.idle_rss)
    b.add(Row("sip_forward_100", f"{what}: agent RSS per bridged call (peak - idle)",
              (peak_rss - run.idle_rss) / max(run.peak, 1) / 1024, "KiB",
              note=f"idle {run.idle_rss / 2**20:.0f} MiB, peak {peak_rss / 2**20:.0f} MiB; "
              "two legs, two RTP streams a call"))  # fmt: skip


def _forward_delay_rows(b: Bench, run: forward.Bridges, floor: dict, n: int) -> None:
    meter = run.meter or {}
    delays = [d for _, _, d in run.packets]
    first, last = run.all_up
    phases = {
        "until the last bridge": [d for _, at, d in run.packets if at < first],
        f"while all {n} were up ({max(0.0, last - first):.1f} s)": [
            d for _, at, d in run.packets if first <= at <= last
        ],
        "from the first hang-up": [d for _, at, d in run.packets if at > last],
    }
    ways = {way: [d for w, _, d in run.packets if w == i]
            for i, way in enumerate(("to the targets", "to the callers"))}  # fmt: skip
    seconds: dict[int, list[float]] = {}
    for _, at, d in run.packets:
        seconds.setdefault(int(at - run.started_at), []).append(d)
    worst = max(seconds.items(), key=lambda item: percentile(item[1], 99), default=None)
    sent, received = meter.get("sent", [0, 0]), meter.get("received", [0, 0])
    alone = floor["delay_ms"]["all"]
    what = "RTP forwarding delay through the agent, one pass"
    b.add(Row("sip_forward_100", f"{what}: p50", percentile(delays, 50), "ms",
              client_cpu=meter.get("cpu_s", math.nan) / max(meter.get("wall_s", 1), 1e-6),
              note=f"{len(delays):,} packets timed, {n} bridges; "
              + ", ".join(f"{way}: p50 {percentile(v, 50):.2f} ms, p99 {percentile(v, 99):.2f} ms"
                          for way, v in ways.items())
              + f"; the meter alone, socket to socket with as many flows: p50 "
              f"{alone['p50'] * 1000:.1f} µs, p99 {alone['p99'] * 1000:.1f} µs"))  # fmt: skip
    p99 = percentile(delays, 99)
    note = f"p99.9 {percentile(delays, 99.9):.2f} ms, max {percentile(delays, 100):.1f} ms; p99 "
    note += ", ".join(f"{phase} {percentile(v, 99):.2f} ms ({len(v):,} packets)"
                      for phase, v in phases.items() if v)  # fmt: skip
    if worst is not None:
        second, values = worst
        note += (f"; worst second: p99 {percentile(values, 99):.2f} ms, in second "
                 f"{second + 1} after the callers' start ({len(values):,} packets)")  # fmt: skip
    b.add(Row("sip_forward_100", f"{what}: p99", p99, "ms", target="<= 10 ms",
              met=p99 <= 10 and bool(delays), note=note))  # fmt: skip
    lost = sum(sent) - sum(received)
    b.add(Row("sip_forward_100", f"{what}: packets not relayed", lost, "packets",
              note=f"{sent[0]:,} sent to the agent from the callers' side, {received[0]:,} "
              f"relayed to the targets; {sent[1]:,} from the targets' side, {received[1]:,} "
              f"relayed to the callers; {meter.get('crossed', 0)} arrived on another bridge; "
              f"{meter.get('paired', 0)} of {meter.get('legs', 0)} bridges relayed the "
              "callers' first packets"))  # fmt: skip
