"""Issue 43's scenario: calls from the browser, bridged by one agent to SIPp, against the same
agent bridging as many forwarded SIP-to-SIP calls (bench/forward.py) in the same run.

sip_browser_50: bench/browser_load.py is `browser_calls` aiortc tabs of one user, each placing
a call from the browser over one socket (Relay's Daphne, with the agents' settings); one agent
answers each tab's WebRTC offer, dials SIPp, which answers in PCMU and echoes, and joins the two
legs. The tabs talk together for `browser_talk_seconds`, 20 ms packets, and time each packet's
round trip through the agent twice (to SIPp and back). The baseline is a batch of as many
forwarded calls on a fresh agent, SIPp as caller and target (echoing), holding the same talk.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from bench import fixtures, forward, sip
from bench.report import Row
from bench.scenarios.common import Bench, sip_start
from bench.stats import percentile
from calls.models import Call
from calls.states import TERMINAL_STATES
from harness.live import ChildProcess, DaphneProcess, wait_until
from harness.ports import rtp_range
from harness.sip import Sipp, free_udp_port

LOAD = Path(__file__).resolve().parent.parent / "browser_load.py"


def sip_browser_50(b: Bench) -> None:
    p = b.profile
    workdir = sip_start(b, "sip_browser_50")
    n, talk = p.browser_calls, p.browser_talk_seconds
    base = _sip_bridges(b, workdir / "sip-to-sip", n, talk)
    browser = _browser_calls(b, workdir / "browser", n, talk)

    what = f"{n} calls from the browser at once on one agent"
    base_ms = base.agent_cpu / max(base.calls, 1) * 1000
    per_call = browser["agent_cpu"] / n * 1000
    b.add(Row("sip_browser_50", "agent CPU per bridged SIP-to-SIP call (the baseline)", base_ms,
              "CPU ms", server_cpu=base.agent_cpu / base.wall,
              client_cpu=base.load_cpu / base.wall,
              note=f"{n} forwarded calls at once, each caller (SIPp) talking {talk:.0f} s in "
              f"20 ms packets to a target (SIPp) that echoes; "
              f"{forward.runs_note([base])}"))  # fmt: skip
    lost = browser["lost_calls"]
    b.add(Row("sip_browser_50", f"{what}: agent CPU per call", per_call, "CPU ms", base_ms,
              "SIP-to-SIP bridge, same calls and talk", "<= 2x the SIP-to-SIP bridge",
              per_call <= 2 * base_ms and lost == 0, browser["agent_cpu"] / browser["wall"],
              browser["client_cpu"] / browser["wall"],
              note=f"{browser['completed']} of {n} completed; WebRTC (ICE, DTLS-SRTP) set up, "
              f"PCMU both ways, {talk:.0f} s of 20 ms packets each way, echoed by SIPp; "
              f"setup (offer to answered) p50 {browser['setup_p50']:.1f} s, max "
              f"{browser['setup_max']:.1f} s; {browser['errors']}"))  # fmt: skip
    rtts = browser["rtts"]
    p99 = percentile(rtts, 99)
    b.add(Row("sip_browser_50", f"{what}: relay delay p99 (round trip, two passes)", p99, "ms",
              target="<= 20 ms", met=bool(rtts) and p99 <= 20,
              note=f"{len(rtts):,} packets timed tab -> agent -> SIPp -> agent -> tab, so one "
              f"pass is at most this; p50 {percentile(rtts, 50):.2f} ms, p99.9 "
              f"{percentile(rtts, 99.9):.2f} ms, max {percentile(rtts, 100):.1f} ms; the tabs' "
              "aiortc (SRTP, one Python process) counts in it"))  # fmt: skip
    b.add(Row("sip_browser_50", f"{what}: packets lost", browser["lost_packets"], "packets",
              target="0", met=browser["lost_packets"] == 0 and browser["sent"] > 0,
              note=f"{browser['sent']:,} sent by the tabs, {browser['heard']:,} heard back; "
              f"{browser['foreign']} heard on another tab's call"))  # fmt: skip
    b.keep_logs = b.keep_logs or lost > 0 or browser["lost_packets"] > 0


def _sip_bridges(b: Bench, workdir: Path, n: int, talk: float) -> forward.Bridges:
    """The baseline: `n` forwarded calls bridged at once, talking `talk` seconds."""
    number = fixtures.forwarding_number()
    talk_ms, play = forward.silent_talk(workdir, talk)
    return forward.bridges(b, workdir, number, calls=n, talk_ms=talk_ms, capacity=2 * n,
                           target_codec=forward.PCMU, echo=True, caller_play=play,
                           deadline=120)  # fmt: skip


def _browser_calls(b: Bench, workdir: Path, n: int, talk: float) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    trunk_port = free_udp_port()
    target = Sipp(workdir / "target", forward.TARGET_XML, port=trunk_port, calls=n,
                  echo=True, timeout=300, answer_ms=forward.ANSWER_MS,
                  codec=forward.PCMU[0], codec_name=forward.PCMU[1],
                  media_port=sip.SIPP_MEDIA)  # fmt: skip
    agents = web = None
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{trunk_port}", count=1,
                            capacity=2 * n, RTC_PORT_RANGE=rtp_range(8 * n))  # fmt: skip
        web = DaphneProcess(workdir, environ=agents.env, log=workdir / "daphne.log")
        out = workdir / "browsers.json"
        own0, tts0 = agents.cpu()
        started = time.monotonic()
        url = f"ws://127.0.0.1:{web.port}/ws?token={b.ws[0][0]}"
        argv = [sys.executable, str(LOAD), "--ws", url, "--calls", str(n), "--talk",
                str(talk), "--out", str(out)]  # fmt: skip
        load = ChildProcess(argv, dict(os.environ), log=workdir / "browsers.log")
        try:
            load.proc.wait(timeout=talk + 180)
        finally:
            load.stop()
        own1, tts1 = agents.cpu()
        wall = time.monotonic() - started
        result = json.loads(out.read_text()) if out.exists() else {"tabs": [], "errors": []}
        ids = [tab["callId"] for tab in result["tabs"]]
        wait_until(lambda: _ended(ids), deadline=30, what="the browser calls to end")
    finally:
        for process in (web, agents, target):
            if process is not None:
                process.stop()
    tabs = result["tabs"]
    statuses = dict(Call.objects.filter(call_id__in=ids).values_list("call_id", "status"))
    completed = sum(1 for s in statuses.values() if s == "completed")
    setups = [t["setup_s"] for t in tabs if t["setup_s"] == t["setup_s"]]  # not NaN
    errors = result["errors"]
    return {
        "agent_cpu": own1 - own0 + tts1 - tts0,
        "wall": wall,
        "client_cpu": result.get("cpu_s", 0.0),
        "completed": completed,
        "lost_calls": n - completed,
        "rtts": [rtt for t in tabs for rtt in t["rtt_ms"]],
        "sent": sum(t["sent"] for t in tabs),
        "heard": sum(t["heard"] for t in tabs),
        "lost_packets": sum(t["sent"] - t["heard"] for t in tabs),
        "foreign": sum(t["foreign"] for t in tabs),
        "setup_p50": percentile(setups, 50),
        "setup_max": max(setups, default=float("nan")),
        "errors": f"{len(errors)} tabs failed: {errors[:2]}" if errors else "no tab failed",
    }


def _ended(call_ids: list[str]) -> bool:
    active = Call.objects.filter(call_id__in=call_ids).exclude(status__in=TERMINAL_STATES)
    return not active.exists()
