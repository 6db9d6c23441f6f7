"""sip_forward_cpu's and sip_forward_100's machinery (issue 28): calls to a number that
forwards, bridged by one telephony agent, with SIPp as both the callers and the trunk (the
target's phone), and bench/rtpmeter.py as both ends' media when the delay is measured.

Imported after Django is set up, as bench/sip.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import resource
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.utils import timezone

from bench import sip, sipp_log
from calls.models import Call, Leg
from calls.states import ACTIVE_STATES
from harness.live import wait_until
from harness.sip import Sipp, free_udp_port

SIPP = Path(__file__).resolve().parent / "sipp"
CALLER_XML, TARGET_XML = SIPP / "forward_caller.xml", SIPP / "forward_target.xml"
PCMA, PCMU = ("8", "PCMA"), ("0", "PCMU")
CALLER = "+447700900123"
ANSWER_MS = 300  # the target rings this long before it answers
BRIDGED = re.compile(
    r"inbound call (?P<call_id>\S+): bridged (?P<seconds>\d+) s \(caller [^,]*, target [^)]*\); "
    r"relayed (?P<to_target>\d+) "
    r"packets to the target, (?P<to_caller>\d+) to the caller"
)


def speech_pcap(path: Path, alaw: bytes) -> float:
    """A capture SIPp's play_pcap_audio sends: `alaw` as RTP (PCMA, payload type 8) in 20 ms
    packets, as phones and Relay send them (SIPp's own g711a.pcap has 30 ms packets, a third
    fewer for the same speech); Ethernet, IPv4 and UDP headers as SIPp parses them (it
    rewrites addresses and ports). Returns the seconds it plays."""
    frames = [alaw[i : i + 160].ljust(160, b"\xd5") for i in range(0, len(alaw), 160)]
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]  # DLT_EN10MB
    for n, frame in enumerate(frames):
        rtp = struct.pack("!BBHII", 0x80, 0x88 if n == 0 else 8, n, 160 * n, 0x5EB0F00D) + frame
        udp = struct.pack("!HHHH", 6000, 6000, 8 + len(rtp), 0) + rtp
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), n & 0xFFFF, 0, 64, 17, 0,
                         bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1])) + udp  # fmt: skip
        packet = b"\x00" * 12 + b"\x08\x00" + ip
        at = n * 20_000  # microseconds
        out.append(struct.pack("<IIII", at // 1_000_000, at % 1_000_000, len(packet), len(packet)))
        out.append(packet)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(out))
    return len(frames) * 0.02


def play(pcap: Path) -> str:
    """The caller scenario's @play@: SIPp sends the capture from its answer."""
    return f'  <nop><action><exec play_pcap_audio="{pcap}"/></action></nop>'


def silent_talk(workdir: Path, seconds: float) -> tuple[int, str]:
    """The callers' talk: `seconds` of A-law silence in 20 ms packets (workdir/talk.pcap); the
    milliseconds it plays, and the caller scenario's @play@ of it."""
    pcap = workdir / "talk.pcap"
    played = speech_pcap(pcap, b"\xd5" * round(8000 * seconds))
    return round(played * 1000), play(pcap)


def meter_floor(workdir: Path, *, legs: int, seconds: float) -> dict:
    """bench/rtpmeter.py's `direct` mode: the instrument alone, socket to socket."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "floor.json"
    argv = [sys.executable, "-m", sip.METER, "direct", "--a-port", str(free_udp_port()),
            "--b-port", str(free_udp_port()), "--legs", str(legs), "--seconds",
            str(seconds), "--out", str(out)]  # fmt: skip
    subprocess.run(argv, check=True, timeout=seconds + 60)  # noqa: S603 - our own script
    return json.loads(out.read_text())


@dataclass
class Bridges:
    """One batch of forwarded calls placed at once by SIPp to one agent, as the harness saw
    them."""

    calls: int
    talk_s: float
    received: int = 0  # inbound calls the agent opened a ledger row for
    bridged: int = 0  # recorded answered, by the target (an inbound call the agent ended)
    lost: int = 0
    relayed_both_ways: int = 0  # bridges whose log line counts packets relayed each way
    to_target: int = 0  # packets the agent relayed, from its log lines of the bridges
    to_caller: int = 0
    bridged_seconds: list = field(default_factory=list)
    peak: int = 0  # most legs between bridge and end at one instant (the database's times)
    polled: int = 0  # most bridges up at one 0.2 s sample
    last_bridge: float = math.nan  # seconds from the callers' start to the last bridge
    agent_cpu: float = 0.0
    load_cpu: float = 0.0  # both SIPps and the meter, CPU seconds
    wall: float = 0.0
    idle_rss: int = 0
    samples: list = field(default_factory=list)
    caller_status: int | None = None
    target_status: int | None = None
    warnings: int = 0
    resent: int = 0  # INVITEs the target received past the first of each leg
    sip_drops: int = 0
    meter: dict | None = None  # bench/rtpmeter.py's result
    packets: list = field(default_factory=list)  # its packets: (direction, epoch s, delay ms)
    all_up: tuple = (math.nan, math.nan)  # epoch seconds: the last bridge, the first end
    started_at: float = math.nan  # epoch seconds: the callers' start


def runs_note(runs: list[Bridges]) -> str:
    """What the harness saw of one or more batches, summed (per batch where it differs)."""
    calls, bridged = sum(r.calls for r in runs), sum(r.bridged for r in runs)
    both = sum(r.relayed_both_ways for r in runs)
    to_target, to_caller = sum(r.to_target for r in runs), sum(r.to_caller for r in runs)
    cpu, wall = sum(r.agent_cpu for r in runs), sum(r.wall for r in runs)
    per_call = (to_target + to_caller) / max(1, bridged)
    callers = "/".join(str(r.caller_status) for r in runs)
    targets = "/".join(str(r.target_status) for r in runs)
    note = (f"{bridged} of {calls} bridged and recorded answered by the target, {both} "
            f"relayed audio both ways ({to_target:,} packets to the targets, {to_caller:,} to "
            f"the callers: {per_call:,.0f} a call, both ways together); {cpu:.1f} CPU s over "
            f"{wall:.0f} s")  # fmt: skip
    if len(runs) > 1:
        by_leg = "/".join(f"{r.agent_cpu / r.calls * 1000:.0f}" for r in runs)
        note += f" ({by_leg} CPU ms per call by leg)"
    note += f"; SIPp exit {callers} (callers), {targets} (target)"
    received = sum(r.received for r in runs)
    if received != calls:
        note += f"; the agent saw {received} of the {calls} INVITEs"
    warnings, resent = sum(r.warnings for r in runs), sum(r.resent for r in runs)
    note += f"; {warnings} agent log lines at WARNING or above" if warnings else ""
    note += f"; {resent} INVITEs resent to the target" if resent else ""
    if drops := sum(r.sip_drops for r in runs):
        note += f"; the kernel dropped {drops} datagrams at the agent's SIP socket"
    return note


def bridges(b, workdir: Path, number, *, calls: int, talk_ms: int, capacity: int,
            target_codec=PCMU, echo: bool, caller_play: str = "", meter_seconds: float = 0,
            deadline: float) -> Bridges:  # fmt: skip
    """One agent (SIP_AGENTS=1, `capacity` places: a forwarded call takes two), SIPp as its
    trunk answering every leg in `target_codec` (echoing the audio with `echo`), one
    unmeasured warm-up call, then SIPp placing `calls` calls to `number` within a second, each
    held `talk_ms` after its answer and saying `caller_play`; sampled until all are recorded.
    With `meter_seconds`, bench/rtpmeter.py is both ends' media, sending for that long."""
    workdir.mkdir(parents=True, exist_ok=True)
    run = Bridges(calls, talk_ms / 1000)
    trunk_port = free_udp_port()
    a_port = b_port = 0
    if meter_seconds:
        a_port, b_port = free_udp_port(), free_udp_port()
    target = Sipp(workdir / "target", TARGET_XML, port=trunk_port, calls=1 + calls, echo=echo,
                  timeout=deadline + 120, answer_ms=ANSWER_MS, codec=target_codec[0],
                  codec_name=target_codec[1],
                  media_port=b_port or sip.SIPP_MEDIA)  # fmt: skip
    agents = meter = callers = None
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{trunk_port}", count=1,
                            capacity=capacity)  # fmt: skip
        agent_at = agents.env["SIP_BIND"]

        def place(name: str, count: int, talk: int, media, sounds: str) -> Sipp:
            return Sipp(workdir / name, CALLER_XML, port=free_udp_port(), calls=count,
                        limit=count, timeout=deadline + 60, remote=agent_at,
                        service=number.number, caller=CALLER, media_port=media,
                        play=sounds, talk_ms=talk)  # fmt: skip

        warm = place("warm", 1, 1000, sip.SIPP_MEDIA, "")
        sip.sipp_exit(warm, deadline=60)
        warm.stop()
        up = Call.objects.filter(number=number, status__in=ACTIVE_STATES)
        wait_until(lambda: not up.exists(), deadline=30, what="the warm-up call to be recorded")
        run.idle_rss = agents.rss()
        children0 = _children_cpu() - sip.cpu_seconds(target.proc.pid)
        t0, since = timezone.now(), batch_start(agents)
        run.started_at = t0.timestamp()
        if meter_seconds:
            out = workdir / "meter.json"
            argv = [sys.executable, "-m", sip.METER, "bridge", "--messages",
                    str(workdir / "callers" / "sipp-messages.log"), "--a-port", str(a_port),
                    "--b-port", str(b_port), "--legs", str(calls), "--seconds",
                    str(meter_seconds), "--deadline", str(deadline), "--out", str(out)]  # fmt: skip
            meter = sip.Meter(argv, dict(os.environ), log=workdir / "meter.log")
        callers = place("callers", calls, talk_ms, a_port or sip.SIPP_MEDIA, caller_play)
        run.samples = watch_bridges(number, t0, calls, agents, deadline=deadline)
        batch_end(run, agents, since)
        run.caller_status = sip.sipp_exit(callers, deadline=60)
        run.target_status = sip.sipp_exit(target, deadline=30)
        if meter is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                meter.proc.wait(timeout=30)
            if out.exists():
                run.meter = json.loads(out.read_text())
                run.packets = meter_packets(run.meter, out)
        run.load_cpu = _children_cpu() - children0
    finally:
        for process in (meter, callers, agents, target):
            if process is not None:
                process.stop()
    run.warnings = agents.warnings()
    _tally(run, number, t0, agents, target)
    return run


def batch_start(agents) -> tuple:
    """What a batch of calls is measured from (batch_end): the agents' CPU and the clock."""
    return agents.cpu(), time.monotonic()


def batch_end(run, agents, since: tuple) -> None:
    """`run`'s wall clock, the agents' CPU (their own and the speech runs they reaped) and
    the datagrams dropped at their SIP sockets, from `since` (batch_start) to now."""
    (own0, tts0), started = since
    own1, tts1 = agents.cpu()
    run.wall = time.monotonic() - started
    run.agent_cpu = own1 - own0 + tts1 - tts0
    run.sip_drops = agents.sip_drops()


def _children_cpu() -> float:
    """CPU seconds of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tally(run: Bridges, number, t0: datetime, agents, target) -> None:
    calls = Call.objects.filter(number=number, direction="inbound", created_at__gte=t0)
    ids = set(calls.values_list("sip_call_id", flat=True))
    run.received = len(ids)
    records = calls.filter(outcome="answered", answered_by="person")
    run.bridged = records.count()
    run.lost = run.calls - run.bridged
    for log in agents.logs:
        for found in BRIDGED.finditer(log.read_text(errors="replace")):
            if found["call_id"] in ids:
                to_target, to_caller = int(found["to_target"]), int(found["to_caller"])
                run.to_target += to_target
                run.to_caller += to_caller
                run.relayed_both_ways += to_target > 0 and to_caller > 0
                run.bridged_seconds.append(int(found["seconds"]))
    legs = Leg.objects.filter(call__in=calls, answered_at__isnull=False)
    spans = [sip.Placed("", "", "", "", a.timestamp(), e and e.timestamp())
             for a, e in legs.values_list("answered_at", "ended_at")]  # fmt: skip
    run.peak = sip.peak_in_progress(spans)
    run.polled = max((s.in_progress for s in run.samples), default=0)
    if spans:
        run.last_bridge = max(s.answered_at for s in spans) - t0.timestamp()
    invites = sipp_log.invites(target.messages)
    run.resent = sipp_log.invites_received(target.messages) - len(invites)
    run.all_up = all_up_window(number, t0)


def watch_bridges(number, t0: datetime, count: int, agents, *, deadline: float) -> list:
    """Sample the bridges up and the agent every 0.2 s until the `count` calls to `number`
    since `t0` are all recorded, or `deadline` passes (the rest are then reported lost)."""
    samples: list[sip.Sample] = []
    calls = Call.objects.filter(number=number, direction="inbound", created_at__gte=t0)

    def all_recorded() -> bool:
        up = Leg.objects.filter(call__in=calls, answered_at__isnull=False,
                                ended_at__isnull=True).count()  # fmt: skip
        own, tts = agents.cpu()
        samples.append(sip.Sample(time.monotonic(), up, own + tts, agents.rss()))
        return calls.filter(outcome__isnull=False).count() >= count

    with contextlib.suppress(AssertionError):
        wait_until(all_recorded, deadline=deadline, what="the forwarded calls to end",
                   interval=0.2)  # fmt: skip
    return samples


def message_pcap(workdir: Path, text: str) -> tuple[Path, float]:
    """`text` as espeak-ng speaks it for the agents (Speech, A-law), in a capture of 20 ms
    packets; and the seconds it plays."""
    from telephony.speech import Speech

    alaw = Speech(workdir / "tts").render(text, "en")[8]
    path = workdir / "message-20ms.pcap"
    return path, speech_pcap(path, alaw)


def meter_packets(result: dict, out: Path) -> list[tuple[int, float, float]]:
    """The meter's received packets: (direction, arrival epoch seconds, delay ms)."""
    from array import array

    path = Path(str(out) + ".packets")
    values = array("d")
    with path.open("rb") as f:
        values.frombytes(f.read())
    start = result["wall_start"]
    return [(int(values[i]), start + values[i + 1], values[i + 2])
            for i in range(0, len(values), 3)]  # fmt: skip


def all_up_window(number, t0: datetime) -> tuple[float, float]:
    """(epoch seconds) from the last bridge of the calls since `t0` to the first end of one."""
    calls = Call.objects.filter(number=number, direction="inbound", created_at__gte=t0)
    legs = list(Leg.objects.filter(call__in=calls, answered_at__isnull=False)
                .values_list("answered_at", "ended_at"))  # fmt: skip
    if not legs or any(e is None for _, e in legs):
        return math.nan, math.nan
    return max(a for a, _ in legs).timestamp(), min(e for _, e in legs).timestamp()
