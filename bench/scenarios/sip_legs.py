"""Issue 26's scenarios, built on legs: a leg is one agent given a batch of calls at once, all
with one message, against SIPp straight over UDP or behind Kamailio over TLS with SRTP.
sip_tls_srtp_cpu sets the two transports side by side; sip_200_calls holds every call up at once
and, over UDP, measures the steady audio of issue 29. sip_forward_cpu reuses the leg as its
baseline."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import sip, sipp_log
from bench.report import Row
from bench.scenarios.common import Bench, alternated, relay_urls, sip_start
from bench.stats import percentile
from bench.wsload import ClientGroup


@dataclass
class Leg:
    """One batch of calls submitted at once to one agent, one message for all of them (its
    speech rendered by an unmeasured warm-up call first), as the harness saw it."""

    secure: bool  # TLS through Kamailio with SRTP, else plain UDP straight to SIPp
    calls: int
    completed: int = 0
    lost: int = 0  # not completed, or SIPp never saw its INVITE
    heard: int = 0  # calls whose agent heard echoed speech
    peak: int = 0  # most calls between answer and end at one instant (the database's times)
    polled: int = 0  # most calls in_progress at one 0.2 s sample
    agent_cpu: float = 0.0  # CPU seconds, espeak-ng and sox included
    tts_cpu: float = 0.0
    sipp_cpu: float = 0.0
    kamailio_cpu: float = math.nan
    client_cpu: float = 0.0  # the WebSocket client's CPU seconds
    wall: float = 0.0
    idle_rss: int = 0
    samples: list = field(default_factory=list)
    last_answer: float = math.nan  # seconds from the submit to the last call's answer
    sipp_status: int | None = None
    warnings: int = 0  # lines the agent logged at WARNING or above
    acked: int = 0  # calls the WebSocket acked as queued
    submit_errors: str = ""  # error frames the submits got, by code
    resent: int = 0  # INVITEs SIPp received past the first of each call (the agent's resends)
    sip_drops: int = 0  # datagrams the kernel dropped at the agent's SIP socket (UDP)
    steady: sip.Steady | None = None  # metered legs: the calls as the far end heard them

    @property
    def what(self) -> str:
        return "TLS + SRTP via Kamailio" if self.secure else "plain UDP"


def sip_leg(b: Bench, workdir: Path, prefix: str, *, secure: bool, calls: int, sentences: int,
             deadline: float, metered: bool = False) -> Leg:  # fmt: skip
    """One agent (SIP_AGENTS=1, room for every call), its far end, a warm-up call, then
    `calls` calls at once with the same message, sampled until all have ended. `metered`:
    the far end's media is bench/rtpmeter.py, which echoes and times the agent's audio."""
    text = sip.message("cost", sentences)
    far_end = sip.FarEnd(workdir, secure=secure, calls=1 + calls, timeout=deadline + 120,
                         metered=metered)  # fmt: skip
    leg = Leg(secure, calls)
    agents = None
    try:
        agents = sip.Agents(b.env, workdir, trunk=far_end.trunk, count=1, capacity=calls,
                            **far_end.settings)  # fmt: skip
        urls = relay_urls(b, min(10, len(b.ws)))
        with ClientGroup(urls, 1, {"mode": "submit"}, deadline=900) as group:
            group.ready(timeout=60)
            group.run({"calls": [{"callId": f"{prefix}warm", "message": text}]}, timeout=60)
            sip.watch(f"{prefix}warm", 1, agents, deadline=60)
            batch = [{"callId": f"{prefix}load-{i}", "message": text} for i in range(calls)]
            leg.idle_rss = agents.rss()
            (own0, tts0), (sipp0, kam0) = agents.cpu(), far_end.cpu()
            started, submitted = time.monotonic(), time.time()
            run = group.run({"calls": batch}, timeout=120)
            leg.acked = len(run.merged("acked_at"))
            leg.submit_errors = ", ".join(f"{n} {code}" for code, n in run.errors().items())
            leg.samples = sip.watch(f"{prefix}load-", calls, agents, deadline=deadline)
            (own1, tts1), (sipp1, kam1) = agents.cpu(), far_end.cpu()
            leg.wall = time.monotonic() - started
            leg.sip_drops = agents.sip_drops()
        leg.agent_cpu, leg.tts_cpu = own1 - own0 + tts1 - tts0, tts1 - tts0
        leg.sipp_cpu, leg.kamailio_cpu = sipp1 - sipp0, kam1 - kam0
        leg.client_cpu = run.client_cpu * run.wall
        leg.sipp_status = sip.sipp_exit(far_end.sipp, deadline=60)
        audio = agents.ended_calls()
    finally:
        if agents is not None:
            agents.stop()
        far_end.stop()
    leg.warnings = agents.warnings()
    placed = list(sip.placed(f"{prefix}load-").values())
    invites = sipp_log.invites(far_end.sipp.messages)
    leg.resent = sipp_log.invites_received(far_end.sipp.messages) - len(invites)
    done = [c for c in placed if c.status == "completed"]
    leg.completed = len(done)
    leg.lost = calls - sum(1 for c in done if c.sip_call_id in invites)
    b.keep_logs = b.keep_logs or leg.lost > 0  # what went wrong is in the agents' and SIPp's logs
    leg.heard = sum(1 for c in placed if audio.get(c.pk, {}).get("speech", 0) > 0)
    leg.peak = sip.peak_in_progress(placed)
    leg.polled = max((s.in_progress for s in leg.samples), default=0)
    answers = [c.answered_at for c in placed if c.answered_at is not None]
    leg.last_answer = max(answers) - submitted if answers else math.nan
    if metered:
        message_s = sip.message_seconds(Path(agents.env["TTS_CACHE_DIR"]), text)
        leg.steady = sip.steady(placed, sipp_log.dialogs(far_end.sipp.messages), far_end.streams(),
                                message_s)  # fmt: skip
    return leg


def legs_note(legs: list[Leg]) -> str:
    calls = sum(leg.calls for leg in legs)
    completed, heard = sum(leg.completed for leg in legs), sum(leg.heard for leg in legs)
    cpu, wall = sum(leg.agent_cpu for leg in legs), sum(leg.wall for leg in legs)
    per_leg = "/".join(f"{leg.agent_cpu / leg.calls * 1000:.0f}" for leg in legs)
    note = (f"{completed} of {calls} completed, {heard} heard their echoed speech; "
            f"{cpu:.1f} CPU s over {wall:.0f} s"
            + (f" ({per_leg} CPU ms per call by leg)" if len(legs) > 1 else "") + "; SIPp exit "
            f"{'/'.join(str(leg.sipp_status) for leg in legs)}")  # fmt: skip
    warnings = sum(leg.warnings for leg in legs)
    acked = sum(leg.acked for leg in legs)
    if acked < calls:
        note += f"; only {acked} of the {calls} submits acked"
    note += "".join(f"; submit errors: {leg.submit_errors}" for leg in legs if leg.submit_errors)
    resent, drops = sum(leg.resent for leg in legs), sum(leg.sip_drops for leg in legs)
    note += f"; {warnings} agent log lines at WARNING or above" if warnings else ""
    note += f"; {resent} INVITEs resent to SIPp" if resent else ""
    return note + (f"; the kernel dropped {drops} datagrams at the agent's SIP socket (full "
                   "receive buffer)" if drops else "")  # fmt: skip


def sip_tls_srtp_cpu(b: Bench) -> None:
    """The agent's CPU per answered call over TLS with SRTP (through Kamailio) against plain
    UDP straight to SIPp: the same calls, the same message, in the same run, alternated
    (UDP, TLS, TLS, UDP, ...) so that the machine's drift hits both alike."""
    p = b.profile
    workdir = sip_start(b, "sip_tls_srtp_cpu")
    stamp = int(time.time())
    legs: dict[bool, list[Leg]] = {False: [], True: []}
    for r, secure in alternated(p.sip_cost_rounds, False, True):
        name = f"{'tls' if secure else 'udp'}-{r}"
        legs[secure].append(sip_leg(b, workdir / name, f"cost-{stamp}-{name}-",
                                     secure=secure, calls=p.sip_cost_calls,
                                     sentences=p.sip_cost_sentences, deadline=120))  # fmt: skip
    figures = {}
    for secure, runs in legs.items():
        calls = sum(leg.calls for leg in runs)
        cpu, wall = sum(leg.agent_cpu for leg in runs), sum(leg.wall for leg in runs)
        load = sum(leg.sipp_cpu + leg.client_cpu for leg in runs)
        lost = sum(leg.lost for leg in runs)
        figures[secure] = (cpu / calls * 1000, cpu / wall, load / wall, lost)
    udp, tls = figures[False], figures[True]
    n = len(legs[False])
    rounds = f"{p.sip_cost_calls} calls at once, {n} leg{'s' if n != 1 else ''} each"
    b.add(Row("sip_tls_srtp_cpu", "agent CPU per answered call, plain UDP straight to SIPp "
              "(the baseline)", udp[0], "CPU ms", server_cpu=udp[1], client_cpu=udp[2],
              note=f"{rounds}; {legs_note(legs[False])}"))  # fmt: skip
    ratio_ok = tls[0] <= 1.5 * udp[0]
    b.add(Row("sip_tls_srtp_cpu", "agent CPU per answered call, TLS + SRTP through Kamailio",
              tls[0], "CPU ms", udp[0], "plain UDP, same calls", "<= 1.5x plain UDP",
              ratio_ok and tls[3] == 0, tls[1], tls[2],
              note=f"{rounds}; {legs_note(legs[True])}"))  # fmt: skip
    kamailio = sum(leg.kamailio_cpu for leg in legs[True])
    calls = sum(leg.calls for leg in legs[True])
    wall = sum(leg.wall for leg in legs[True])
    b.add(Row("sip_tls_srtp_cpu", "Kamailio CPU per call (the far end's TLS proxy, not in "
              "the agent's figure)", kamailio / calls * 1000, "CPU ms",
              server_cpu=kamailio / wall,
              note="its main process and forked workers, psutil"))  # fmt: skip
    lost = udp[3] + tls[3]
    b.add(Row("sip_tls_srtp_cpu", "calls lost: not completed, or no INVITE at SIPp", lost,
              "lost", target="0", met=lost == 0,
              note=f"{udp[3]} over UDP, {tls[3]} over TLS + SRTP"))  # fmt: skip


def sip_200_calls(b: Bench) -> None:
    """One agent (SIP_AGENTS=1) given every call at once, all answered and up together: over plain
    UDP, then (when the profile asks) over TLS with SRTP through Kamailio. The UDP leg's far-end
    media is the RTP meter, for issue 29's steady audio (each call's length against its message, the
    agent's send jitter), beside the same meter on a call alone: the baseline."""
    p = b.profile
    workdir = sip_start(b, "sip_200_calls")
    stamp = int(time.time())
    n = p.sip_many_calls
    alone = sip_leg(b, workdir / "udp-alone", f"many-{stamp}-alone-", secure=False,
                     calls=p.sip_many_alone, sentences=p.sip_many_sentences, deadline=120,
                     metered=True)  # fmt: skip
    for secure in (False, True) if p.sip_many_tls else (False,):
        name = "tls" if secure else "udp"
        leg = sip_leg(b, workdir / name, f"many-{stamp}-{name}-", secure=secure, calls=n,
                       sentences=p.sip_many_sentences, deadline=240,
                       metered=not secure)  # fmt: skip
        what = f"{n} calls at once on one agent, {leg.what}"
        load = (leg.sipp_cpu + leg.client_cpu) / leg.wall
        b.add(Row("sip_200_calls", f"{what}: calls completed", leg.completed, "calls",
                  target=f"{n}", met=leg.completed == n and leg.lost == 0,
                  server_cpu=leg.agent_cpu / leg.wall, client_cpu=load,
                  note=f"{leg.lost} lost; {legs_note([leg])}"))  # fmt: skip
        b.add(Row("sip_200_calls", f"{what}: answered calls up at once", leg.peak, "calls",
                  target=f">= {n}", met=leg.peak >= n,
                  note=f"polled every 0.2 s: {leg.polled}; the last answered "
                  f"{leg.last_answer:.1f} s after the submit"))  # fmt: skip
        up_cpu, up, span = sip.cpu_while_up(leg.samples)
        b.add(Row("sip_200_calls", f"{what}: agent CPU while {up} are up (100% = one core)",
                  up_cpu * 100, "%", server_cpu=up_cpu,
                  note=f"over {span:.1f} s; {leg.agent_cpu / n * 1000:.0f} CPU ms per call over "
                  f"the whole run ({leg.agent_cpu:.1f} s in {leg.wall:.0f} s)"))  # fmt: skip
        peak_rss = max((s.rss for s in leg.samples), default=leg.idle_rss)
        per_call = (peak_rss - leg.idle_rss) / max(leg.peak, 1) / 1024
        b.add(Row("sip_200_calls", f"{what}: agent RSS per concurrent call (peak - idle)",
                  per_call, "KiB",
                  note=f"idle {leg.idle_rss / 2**20:.0f} MiB, "
                  f"peak {peak_rss / 2**20:.0f} MiB"))  # fmt: skip
        if leg.steady is not None and alone.steady is not None:
            _steady_rows(b, what, leg.steady, alone.steady, n)


def _steady_rows(b: Bench, what: str, load: sip.Steady, alone: sip.Steady, n: int) -> None:
    """Issue 29's sip_50_calls, as the far end measured it: each call's length against its message,
    and the agent's RTP send jitter, each beside the same figure of a call alone."""
    within = sum(1 for off in load.off_s if off <= 0.5)
    how = f"{len(alone.off_s)} call{'s' if len(alone.off_s) != 1 else ''} alone"
    start_max = max(load.start_ms, default=math.nan)
    starts = f"p50 {percentile(load.start_ms, 50):.0f} ms, max {start_max:.0f} ms"
    b.add(Row("sip_200_calls", f"{what}: call duration off its message, worst call",
              max(load.off_s, default=math.nan), "s", max(alone.off_s, default=math.nan), how,
              "<= 0.5 s, every call", within == n,
              note=f"{within} of {n} within 0.5 s, p99 {percentile(load.off_s, 99):.2f} s; the "
              f"duration is SIPp's (the callee's): its 200 OK to the agent's BYE, against the "
              f"{load.message_s:.2f} s message; audio at the meter (first packet to last + "
              f"20 ms) off by at most {max(load.audio_off_s, default=math.nan) * 1000:.0f} ms, "
              f"its first packet after the 200 OK {starts}; the database's answered_at to "
              f"ended_at off by at most {max(load.db_off_s, default=math.nan):.2f} s; "
              f"{load.calls} calls answered, hung up and heard, at most {load.peak} at once "
              f"(SIPp's 200 OK to the BYE)"))  # fmt: skip
    for label, q in (("p50", 50), ("p99", 99), ("max", 100)):
        value, base = percentile(load.jitter_ms, q), percentile(alone.jitter_ms, q)
        figure = f"{what}: RTP send jitter, arrival off its 20 ms schedule: {label}"
        b.add(Row("sip_200_calls", figure, value, "ms", base, f"{how}, same meter",
                  "<= 5 ms" if q == 99 else "", value <= 5 if q == 99 else None,
                  note=f"{load.packets:,} packets of {load.calls} calls at the meter, "
                  f"{load.missing} missing; {alone.packets:,} packets alone"
                  if q == 50 else ""))  # fmt: skip
