"""The SIP scenarios' machinery: telephony agents against SIPp, the calls as the database has
them, and Speech timed in-process. SIPp's message log is read by bench/sipp_log.py.

Imported after Django is set up: it reads the calls from their models. SIPp, its ports and
Kamailio's start come from harness/ (sip.py, ports.py, kamailio.py), as the tests' do.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from django.db.models import Count

from bench.kamailio import Kamailio
from bench.sipp_log import Dialog
from calls.models import Call
from calls.states import TERMINAL_STATES, CallState
from harness.live import ChildProcess, child_environ, wait_until
from harness.ports import rtp_range, udp_port_taken
from harness.sip import Sipp, free_udp_port
from telephony.speech import Speech

# Each sentence adds about 5-7 s of espeak-ng speech; the opening alone is about 2 s.
SENTENCES = (
    "This recorded message is read to the callee by the telephony agent, from the moment the "
    "call is answered until the agent hangs up.",
    "It measures how many calls with speech the agents can hold at once, and what each of "
    "them costs.",
)
CALL_ENDED = re.compile(
    r"call (?P<pk>\S+) ended: .*; audio sent (?P<sent>\d+) packets, received (?P<received>\d+) "
    r"packets \((?P<seconds>[\d.]+) s, (?P<speech>[\d.]+) s of it speech\)"
)
NOT_YET_DIALED = (CallState.QUEUED, CallState.DIALING)
AGENT_STARTED = "telephony agent: SIP/"  # telephony/agent.py's first line once it is up
AGENT_TROUBLE = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|^Traceback", re.MULTILINE)


def message(label: str, sentences: int) -> str:
    """A message text of its own for `label` (a new label is a TTS cache miss)."""
    return " ".join((f"Relay benchmark call {label}.", *SENTENCES[:sentences]))


def check_no_worker() -> None:
    """A worker with TELEPHONY_PROVIDER=simulated would race the agents for queued calls."""
    for child in psutil.Process().children(recursive=True):
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if "relay_worker" in argv:
            raise RuntimeError(f"a relay_worker (pid {child.pid}) is running during sip_50_calls")
    queued = Call.objects.filter(status=CallState.QUEUED).count()
    if queued:
        raise RuntimeError(f"{queued} queued calls are left over: the agents would dial them")


def _sip_base_port(count: int) -> int:
    """A free UDP port whose next count - 1 ports are free too: agent n binds port + n."""

    def candidate() -> int | None:
        port = free_udp_port()
        return None if any(udp_port_taken(port + n) for n in range(1, count)) else port

    return wait_until(candidate, deadline=5, what="consecutive free UDP ports", interval=0)


class Agent(ChildProcess):
    stop_grace = 15  # the agent hangs up its calls within 5 s of SIGTERM


class Agents:
    """`count` telephony agents (SIP_AGENTS) of `capacity` calls each, with the bench's
    database and Redis, their trunk at `trunk` (a sip: or sips: URI), `settings` added to
    their environment (SIP_SRTP, SIP_TLS_CA_FILE, ...); logs in `workdir`."""

    def __init__(self, env: dict, workdir: Path, *, trunk: str, count: int, capacity: int,
                 **settings: str):  # fmt: skip
        workdir.mkdir(parents=True, exist_ok=True)
        port = _sip_base_port(count)
        self.env = {
            **env,
            "TELEPHONY_PROVIDER": "sip",
            "SIP_TRUNK_URI": trunk,
            "SIP_BIND": f"127.0.0.1:{port}",
            "SIP_AGENTS": str(count),
            "SIP_MAX_CONCURRENT_CALLS": str(capacity),
            "RTP_PORT_RANGE": rtp_range(max(1000, 4 * count * capacity)),
            "TTS_CACHE_DIR": str(workdir / "tts"),  # new for every run: new texts are misses
            "LOG_LEVEL": "INFO",  # the agent's one line per call is INFO
            **settings,
        }
        self.logs = [workdir / f"agent-{n}.log" for n in range(count)]
        self.procs: list[Agent] = []
        try:
            for n, log in enumerate(self.logs):
                argv = [sys.executable, "manage.py", "telephony_agent", "--index", str(n)]
                self.procs.append(Agent(argv, self.env, log=log))
            for n, agent in enumerate(self.procs):
                wait_until(lambda a=agent: self._started(a), deadline=60,
                           what=f"telephony agent {n} to start")  # fmt: skip
        except BaseException:
            self.stop()
            raise
        self.ps = [psutil.Process(agent.proc.pid) for agent in self.procs]

    @staticmethod
    def _started(agent: Agent, *, after: int = 0) -> bool:
        """Its start-up line (the `after`+1th in its log), logged once its SIP transport is up
        (over TLS without a certificate of its own an agent listens on no port: it only calls
        out)."""
        if agent.proc.poll() is not None:
            raise RuntimeError(f"a telephony agent exited during start-up; see {agent.log_path}")
        return agent.log_path.read_text(errors="replace").count(AGENT_STARTED) > after

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: (the agents' own, the espeak-ng and sox runs they reaped)."""
        own = tts = 0.0
        for ps in self.ps:
            t = ps.cpu_times()
            own += t.user + t.system
            tts += t.children_user + t.children_system
        return own, tts

    def rss(self) -> int:
        return sum(ps.memory_info().rss for ps in self.ps)

    def ended_calls(self) -> dict[str, dict]:
        """Call pk -> the audio figures of the agent's `call ... ended` line."""
        out = {}
        for log in self.logs:
            for found in CALL_ENDED.finditer(log.read_text(errors="replace")):
                out[found["pk"]] = {k: float(v) for k, v in found.groupdict().items() if k != "pk"}
        return out

    def sip_drops(self) -> int:
        """Datagrams the kernel dropped so far at the agents' SIP sockets (UDP only; a call's
        RTP sockets close with it, taking their counts along)."""
        port = int(self.env["SIP_BIND"].rpartition(":")[2])
        return udp_drops(range(port, port + len(self.procs)))

    def warnings(self) -> int:
        """Lines the agents logged at WARNING or above (a failed SIP send, a retry, ...)."""
        return sum(
            len(AGENT_TROUBLE.findall(log.read_text(errors="replace")))
            for log in self.logs
            if log.exists()
        )

    def address(self, n: int) -> str:
        """Agent `n`'s SIP address, host:port (agent n binds SIP_BIND's port + n)."""
        host, _, port = self.env["SIP_BIND"].rpartition(":")
        return f"{host}:{int(port) + n}"

    def restart(self, n: int, *, deadline: float) -> float:
        """Agent `n` drained (SIGTERM: its live calls end first) and started again, as an
        upgrade restarts it; the seconds its drain took. Its log goes on in the same file."""
        agent = self.procs[n]
        started = time.monotonic()
        agent.proc.send_signal(signal.SIGTERM)
        code = agent.proc.wait(timeout=deadline)
        drained = time.monotonic() - started
        if code != 0:
            raise RuntimeError(f"agent {n} exited {code} on its drain; see {agent.log_path}")
        agent.stop()  # closes its log
        before = agent.log_path.read_text(errors="replace").count(AGENT_STARTED)
        argv = [sys.executable, "manage.py", "telephony_agent", "--index", str(n)]
        self.procs[n] = Agent(argv, self.env, log=agent.log_path)
        wait_until(lambda: self._started(self.procs[n], after=before), deadline=60,
                   what=f"telephony agent {n} to start again")  # fmt: skip
        self.ps[n] = psutil.Process(self.procs[n].proc.pid)
        return drained

    def stop(self) -> None:
        for agent in self.procs:
            agent.stop()


# --- SIPp ---------------------------------------------------------------------------------------
ANSWER = Path(__file__).resolve().parent / "sipp" / "answer.xml"
METER = "bench.rtpmeter"  # run as modules from the root, for their imports of bench
KEYS = "bench.rtpkeys"
SIPP_MEDIA = "[media_port]"  # SIPp's own media port, in a scenario's SDP


def answer_scenario(workdir: Path, *, proxied: bool, srtp: bool, media: str = SIPP_MEDIA,
                    dtmf: bool = False) -> Path:  # fmt: skip
    """bench/sipp/answer.xml for one far end: Record-Route copied when a proxy is in front
    of SIPp, an RTP/SAVP answer with Relay's own key when SRTP is asked, `media` as the
    answer's audio port (SIPp's own by default), and telephone-event offered with `dtmf`."""
    kept = []
    for line in ANSWER.read_text().splitlines():
        for marker, wanted in (("@rr@", proxied), ("@srtp@", srtp), ("@dtmf@", dtmf)):
            if line.startswith(marker):
                line = line[len(marker) :] if wanted else None
                break
        if line is not None:
            line = line.replace("@profile@", "RTP/SAVP" if srtp else "RTP/AVP")
            line = line.replace("@events@", " 101" if dtmf else "")
            kept.append(line.replace("@media_port@", media))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"answer-{'tls-srtp' if srtp else 'udp'}.xml"
    path.write_text("\n".join(kept) + "\n")
    return path


class Meter(ChildProcess):
    """bench/rtpmeter.py, in any of its modes."""

    stop_grace = 5


class FarEnd:
    """What the agents call: SIPp answering every INVITE and echoing the audio, straight
    over UDP, or (`secure`) behind Kamailio over TLS with SRTP keys in its answer. With
    `metered`, SIPp's answer names bench/rtpmeter.py's far-end socket as its media, which
    echoes the audio instead of SIPp and times every packet; with `keys` as well, the meter
    presses a key on each call once it goes quiet instead (bench/rtpkeys.py), and the answer
    offers telephone-event. `trunk` and `settings` are what the agents are given to reach
    it."""

    def __init__(self, workdir: Path, *, secure: bool, calls: int, timeout: float,
                 metered: bool = False, keys: bool = False):  # fmt: skip
        self.secure = secure
        self.meter: Meter | None = None
        self.meter_out = workdir / "meter.json"
        media = SIPP_MEDIA
        if metered:
            media = str(free_udp_port())
            mode = (KEYS,) if keys else (METER, "far-end")
            argv = [sys.executable, "-m", *mode, "--a-port", media,
                    "--out", str(self.meter_out), "--deadline", str(timeout)]  # fmt: skip
            workdir.mkdir(parents=True, exist_ok=True)
            self.meter = Meter(argv, child_environ(), log=workdir / "meter.log")
            wait_until(lambda: udp_port_taken(int(media)), deadline=10,
                       what="the RTP meter to listen")  # fmt: skip
        port = free_udp_port()
        scenario = answer_scenario(workdir, proxied=secure, srtp=secure, media=media, dtmf=keys)
        try:
            self.sipp = Sipp(workdir / "sipp", scenario, port=port, calls=calls,
                             echo=not metered, timeout=timeout)  # fmt: skip
        except BaseException:
            self._stop_meter()
            raise
        self.kamailio: Kamailio | None = None
        self.trunk = f"sip:127.0.0.1:{port}"
        self.settings: dict[str, str] = {}
        if secure:
            try:
                self.kamailio = Kamailio(workdir / "kamailio", sipp_port=port)
            except BaseException:
                self.sipp.stop()
                self._stop_meter()
                raise
            self.trunk = self.kamailio.uri
            self.settings = {"SIP_TRANSPORT": "tls", "SIP_TLS_CA_FILE": str(self.kamailio.ca),
                             "SIP_SRTP": "required"}  # fmt: skip

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: (SIPp's, Kamailio's or NaN)."""
        proxy = self.kamailio.cpu_seconds() if self.kamailio is not None else math.nan
        return cpu_seconds(self.sipp.proc.pid), proxy

    def _stop_meter(self) -> None:
        if self.meter is not None:
            self.meter.stop()

    def stop(self) -> None:
        """Stop them all; a meter writes what it measured as it stops (streams())."""
        if self.kamailio is not None:
            self.kamailio.stop()
        self.sipp.stop()
        self._stop_meter()

    def streams(self) -> list[dict]:
        """Once stopped, the meter's streams (bench/rtpmeter.py far-end); none unmetered."""
        if self.meter is None or not self.meter_out.exists():
            return []
        return json.loads(self.meter_out.read_text())["streams"]


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def udp_drops(ports) -> int:
    """Datagrams the kernel dropped at the open IPv4 UDP sockets bound to `ports` (a full
    receive buffer, mostly): the `drops` column of /proc/net/udp, counted since each socket
    was opened, so read it before the sockets close."""
    total = 0
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rpartition(":")[2], 16) in ports:
            total += int(fields[-1])
    return total


def sipp_exit(far_end, *, deadline: float) -> int | None:
    """SIPp's exit status once it has seen all its calls (0: every one succeeded), or None
    if it had not ended by `deadline` (then it is stopped: calls it waits for were lost)."""
    try:
        return far_end.proc.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        far_end.stop()
        return None


# --- the calls in the database --------------------------------------------------------------------
@dataclass
class Placed:
    call_id: str
    pk: str
    status: str
    sip_call_id: str
    answered_at: float | None  # epoch seconds
    ended_at: float | None


def placed(prefix: str) -> dict[str, Placed]:
    rows = Call.objects.filter(call_id__startswith=prefix).values_list(
        "call_id", "pk", "status", "sip_call_id", "answered_at", "ended_at"
    )
    return {
        call_id: Placed(call_id, str(pk), status, provider,
                        answered and answered.timestamp(), ended and ended.timestamp())
        for call_id, pk, status, provider, answered, ended in rows
    }  # fmt: skip


def status_counts(prefix: str) -> dict[str, int]:
    rows = Call.objects.filter(call_id__startswith=prefix).values("status")
    return dict(rows.annotate(n=Count("id")).values_list("status", "n"))


def peak_in_progress(calls: list[Placed]) -> int:
    """Most calls between their answer and their end at one instant (a call ending at the
    instant another is answered is not counted twice)."""
    edges = []
    for call in calls:
        if call.answered_at is not None:
            edges += [(call.answered_at, 1), (call.ended_at or math.inf, -1)]
    peak = up = 0
    for _, change in sorted(edges):
        up += change
        peak = max(peak, up)
    return peak


@dataclass
class Sample:
    t: float
    in_progress: int
    cpu: float  # the agents' CPU seconds so far, espeak-ng and sox included
    rss: int


def watch(prefix: str, count: int, agents: Agents, *, deadline: float) -> list[Sample]:
    """Sample the calls and the agents every 0.2 s until all `count` calls have ended, or
    `deadline` passes (the calls still open then are reported as lost, not raised)."""
    samples: list[Sample] = []

    def all_ended() -> bool:
        counts = status_counts(prefix)
        own, tts = agents.cpu()
        samples.append(Sample(time.monotonic(), counts.get(CallState.IN_PROGRESS, 0),
                              own + tts, agents.rss()))  # fmt: skip
        return sum(counts.get(status, 0) for status in TERMINAL_STATES) >= count

    with contextlib.suppress(AssertionError):
        wait_until(all_ended, deadline=deadline, what=f"the {prefix} calls to end", interval=0.2)
    return samples


def cpu_while_up(samples: list[Sample]) -> tuple[float, int, float]:
    """(the agents' CPU per wall second, calls up, seconds) between the first and the last
    sample with the most calls in progress; NaN over less than a second."""
    top = max((s.in_progress for s in samples), default=0)
    up = [s for s in samples if s.in_progress == top]
    span = up[-1].t - up[0].t if top else 0.0
    if span < 1:
        return math.nan, top, span
    return (up[-1].cpu - up[0].cpu) / span, top, span


def wait_dialed(call_ids: list[str], *, deadline: float) -> None:
    """Until the calls have left queued and dialing: their INVITEs went out and were answered
    with a ringing or more."""

    def dialed() -> bool:
        rows = Call.objects.filter(call_id__in=call_ids).exclude(status__in=NOT_YET_DIALED)
        return rows.count() == len(call_ids)

    wait_until(dialed, deadline=deadline, what="a batch of calls to be dialed", interval=0.02)


# --- speech in-process ----------------------------------------------------------------------------
def render_ms(texts: list[str]) -> dict:
    """Speech.render timed for each new text (a miss), again on the same Speech (memory hit)
    and on a fresh Speech over the same cache directory (file hit, as another agent or a
    restarted one sees it)."""
    out: dict = {"miss": [], "memory": [], "file": [], "audio_s": []}
    with tempfile.TemporaryDirectory(prefix="relay-bench-tts-") as cache:
        speech = Speech(Path(cache))
        for text in texts:
            for kind, renderer in (("miss", speech), ("memory", speech),
                                   ("file", Speech(Path(cache)))):  # fmt: skip
                started = time.perf_counter()
                audio = renderer.render(text, "en")
                out[kind].append((time.perf_counter() - started) * 1000)
            out["audio_s"].append(len(audio[0]) / 8000)  # G.711: 8,000 bytes a second
        out["counters"] = (speech.hits, speech.misses)
    return out


# --- steady audio (issue 29, sip_50_calls): the calls as the far end heard them -------------------
@dataclass
class Steady:
    """Metered calls as the far end saw them: each call's length against its message, and
    every packet of the agent's against its stream's 20 ms schedule."""

    message_s: float  # the message as the agent plays it: its 20 ms frames
    calls: int = 0  # calls with an answer and a BYE at SIPp and a stream at the meter
    off_s: list = field(default_factory=list)  # |SIPp's 200 OK to the BYE - message|, a call
    audio_off_s: list = field(default_factory=list)  # |first to last packet + 20 ms - message|
    start_ms: list = field(default_factory=list)  # SIPp's 200 OK to the first packet
    db_off_s: list = field(default_factory=list)  # |answered_at to ended_at - message|
    jitter_ms: list = field(default_factory=list)  # |arrival - schedule|, every packet
    packets: int = 0
    missing: int = 0  # sequence numbers that never arrived
    peak: int = 0  # most calls between SIPp's 200 OK and the BYE at one instant


def message_seconds(cache_dir: Path, text: str) -> float:
    """How long the agents play `text`: its speech from their cache (`cache_dir`, so the very
    audio they played), in whole 20 ms frames as telephony/sip/rtp.py sends it."""
    audio = Speech(cache_dir).render(text, "en")[0]
    return math.ceil(len(audio) / 160) * 0.02


def steady(calls: list[Placed], dialogs: dict[str, Dialog], streams: list[dict],
           message_s: float) -> Steady:  # fmt: skip
    """Each call matched to its stream at the meter by the RTP port its INVITE offered (of
    that port's streams, the one that began nearest SIPp's answer: a port may have served an
    earlier call, and SIPp stamps its 200 OK once sent, so the first packet may precede it)."""
    out = Steady(message_s)
    by_port: dict[int, list[dict]] = {}
    for stream in streams:
        by_port.setdefault(stream["port"], []).append(stream)
    for call in calls:
        dialog = dialogs.get(call.sip_call_id)
        if dialog is None or dialog.answered is None or dialog.bye is None:
            continue
        candidates = by_port.get(dialog.media_port, [])
        if not candidates:
            continue
        stream = min(candidates, key=lambda s: abs(s["first"] - dialog.answered))
        out.calls += 1
        out.off_s.append(abs(dialog.bye - dialog.answered - message_s))
        out.audio_off_s.append(abs(stream["last"] + 0.02 - stream["first"] - message_s))
        out.start_ms.append((stream["first"] - dialog.answered) * 1000)
        if call.answered_at is not None and call.ended_at is not None:
            out.db_off_s.append(abs(call.ended_at - call.answered_at - message_s))
        out.jitter_ms += [abs(d) for d in stream["deviation_ms"]]
        out.packets += stream["packets"]
        out.missing += stream["missing"]
    out.peak = peak_in_progress([Placed("", "", "", "", d.answered, d.bye) for d in dialogs.values()
                                 if d.answered is not None])  # fmt: skip
    return out
