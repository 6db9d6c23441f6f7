"""sip_ring_group's machinery (issue 57): calls to a number whose ring list rings `all` at
once three phones through the trunk (one SIPp, bench/sipp/ring_target.xml) and its owner's
console tab (bench/ring_tab.py, aiortc), each call answered by one entry and the others
cancelled, on one telephony agent.

Which entry answers is set by the caller's number, so that every entry both wins and loses:
SIPp places the calls from a list of callers (an injection file) whose last digits go round
1, 2, 3 and 4. Phone n (RING_PHONES, numbers ending in n) answers a call whose caller ends in
n and rings on any other until the agent CANCELs it (the phones' regexp: the INVITE's
Request-URI and From end in the same digit); the tab answers the callers ending in 4, which no
phone answers. Every other leg is cancelled: the phones' CANCELs are read back from SIPp's
message log, each with its Reason, the tab's ring from its `rtc_hangup`.

Imported after Django is set up, as bench/sip.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from django.utils import timezone

from bench import fixtures, forward, sip, sipp_log
from calls.models import Call
from calls.states import ACTIVE_STATES
from harness.live import ChildProcess, DaphneProcess, wait_until
from harness.ports import rtp_range
from harness.sip import Sipp, free_udp_port

SIPP = Path(__file__).resolve().parent / "sipp"
PHONES_XML = SIPP / "ring_target.xml"
TAB = Path(__file__).resolve().parent / "ring_tab.py"
REASON = 'Reason: SIP;cause=200;text="Call completed elsewhere"'
# A phone answers when its number's last digit is the caller's (POSIX ERE, with glibc's
# back-reference): the Request-URI's user, then the From header's user.
ANSWERS = r"^INVITE sip:\+[0-9]*([0-9])@.*From:[^@]*\1@"
TAB_DIGIT = "4"  # the callers whose calls the tab answers (no phone ends in it)
PLACES = 6  # a call's places on the agent: the caller, 3 phones, the tab and its ring phone
CALLER = "+44770090012{}"


@dataclass
class RingRun:
    """One batch of calls to the ring group placed at once, as the harness saw them."""

    calls: int
    answered: int = 0  # recorded answered, with exactly one leg answered
    by_expected: int = 0  # ... and that leg the entry the caller's digit names
    by_entry: dict = field(default_factory=dict)  # "phone 1" / "tab" -> calls it answered
    lost: int = 0
    legs_to_cancel: int = 0  # phone legs that did not answer (each should get CANCEL)
    cancelled: int = 0  # ... that SIPp received a CANCEL for
    with_reason: int = 0  # ... whose CANCEL carried REASON
    phones_answered_late: int = 0  # phone legs answered (200) that were not the winner
    tab: dict = field(default_factory=dict)  # bench/ring_tab.py's result
    agent_cpu: float = 0.0
    load_cpu: float = 0.0  # SIPp (caller and phones) and the tab, CPU seconds
    wall: float = 0.0
    caller_status: int | str | None = None
    phones_status: int | str | None = None
    warnings: int = 0
    sip_drops: int = 0
    warmups: int = 1  # unmeasured calls (phone 1's) the tab also rang, one a batch
    told_late: int = 0  # the tab's rings whose end reached it by the phone group (Daphne's log)


def merged(runs: list[RingRun]) -> RingRun:
    """Batches summed, as one (their SIPps' exit statuses joined by /)."""
    out = RingRun(sum(r.calls for r in runs), warmups=len(runs))
    for name in ("answered", "by_expected", "lost", "legs_to_cancel", "cancelled",
                 "with_reason", "phones_answered_late", "agent_cpu", "load_cpu", "wall",
                 "warnings", "sip_drops", "told_late"):  # fmt: skip
        setattr(out, name, sum(getattr(r, name) for r in runs))
    tab = out.tab = {"rung": 0, "offered": 0, "answered": [], "heard": 0, "reasons": {},
                     "still_ringing": 0, "stopped": 0, "never_ended": [], "errors": []}  # fmt: skip
    for r in runs:
        for key, value in r.by_entry.items():
            out.by_entry[key] = out.by_entry.get(key, 0) + value
        for key in ("rung", "offered", "heard", "still_ringing", "stopped", "answered",
                    "never_ended", "errors"):  # fmt: skip
            tab[key] += r.tab.get(key, [] if key in ("answered", "never_ended", "errors") else 0)
        for key, value in r.tab.get("reasons", {}).items():
            tab["reasons"][key] = tab["reasons"].get(key, 0) + value
    out.caller_status = "/".join(str(r.caller_status) for r in runs)
    out.phones_status = "/".join(str(r.phones_status) for r in runs)
    return out


def digit(n: int, ways: int) -> str:
    """The last digit of call n's caller: 1, 2, 3, 4, 1, ... (`ways` 4), or 1, 2, 3, 1, ...
    (`ways` 3: the phones take every call, the tab none)."""
    return str(n % ways + 1)


def _callers(path: Path, digits: list[str]) -> Path:
    path.write_text("SEQUENTIAL\n" + "".join(f"{CALLER.format(d)};\n" for d in digits))
    return path


def _caller_xml(workdir: Path) -> Path:
    """bench/sipp/forward_caller.xml, its caller read from the injection file."""
    path = workdir / "ring_caller.xml"
    path.write_text(forward.CALLER_XML.read_text().replace("[caller]", "[field0]"))
    return path


def ring_calls(b, workdir: Path, number, *, calls: int, talk_ms: int, caller_play: str,
               deadline: float, tab_answers: bool = True) -> RingRun:  # fmt: skip
    """One agent (SIP_AGENTS=1, PLACES per call), one SIPp as every phone of the list (echoing),
    the owner's tab on a Daphne of the agents' settings, one unmeasured warm-up call (phone 1
    answers it), then SIPp placing `calls` calls to `number` within a second, each held
    `talk_ms` after its answer and saying `caller_play`; sampled until all are recorded.
    Without `tab_answers` no caller's number ends in TAB_DIGIT: the tab rings on every call
    and takes none."""
    workdir.mkdir(parents=True, exist_ok=True)
    run = RingRun(calls)
    trunk_port = free_udp_port()
    phones = Sipp(workdir / "phones", PHONES_XML, port=trunk_port, calls=3 * (1 + calls),
                  echo=True, timeout=deadline + 120, answer_ms=forward.ANSWER_MS,
                  codec=forward.PCMU[0], codec_name=forward.PCMU[1],
                  answers=ANSWERS)  # fmt: skip
    agents = web = tab = callers = None
    caller_xml = _caller_xml(workdir)
    out = workdir / "tab.json"
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{trunk_port}", count=1,
                            capacity=PLACES * (calls + 1),
                            RTC_PORT_RANGE=rtp_range(8 * (calls + 1)))  # fmt: skip
        web = DaphneProcess(workdir, environ=agents.env, log=workdir / "daphne.log")
        ready = workdir / "tab.ready"
        token = fixtures.token_for(number.owner)
        argv = [sys.executable, str(TAB), "--ws", f"{web.ws_base}/ws?token={token}",
                "--rings", str(calls + 1), "--answer-suffix", TAB_DIGIT, "--ready",
                str(ready), "--deadline", str(deadline + 60), "--out", str(out)]  # fmt: skip
        tab = ChildProcess(argv, dict(os.environ), log=workdir / "tab.log")
        wait_until(ready.exists, deadline=30, what="the tab's phone to be on")
        agent_at = agents.env["SIP_BIND"]

        def place(name: str, digits: list[str], talk: int, sounds: str) -> Sipp:
            inf = _callers(workdir / f"{name}.csv", digits)
            return Sipp(workdir / name, caller_xml, port=free_udp_port(), calls=len(digits),
                        limit=len(digits), timeout=deadline + 60, remote=agent_at,
                        service=number.number, media_port=sip.SIPP_MEDIA, play=sounds,
                        talk_ms=talk, extra=("-inf", str(inf)))  # fmt: skip

        warm = place("warm", ["1"], 1000, "")
        sip.sipp_exit(warm, deadline=60)
        warm.stop()
        up = Call.objects.filter(number=number, status__in=ACTIVE_STATES)
        wait_until(lambda: not up.exists(), deadline=30, what="the warm-up call to be recorded")
        children0 = forward._children_cpu() - sip.cpu_seconds(phones.proc.pid)
        t0, since = timezone.now(), forward.batch_start(agents)
        callers = place(
            "callers",
            [digit(n, 4 if tab_answers else 3) for n in range(calls)],
            talk_ms,
            caller_play,
        )
        forward.watch_bridges(number, t0, calls, agents, deadline=deadline)
        forward.batch_end(run, agents, since)
        run.caller_status = sip.sipp_exit(callers, deadline=60)
        run.phones_status = sip.sipp_exit(phones, deadline=30)
        with contextlib.suppress(Exception):
            tab.proc.wait(timeout=30)
        run.load_cpu = forward._children_cpu() - children0
    finally:
        for process in (callers, tab, web, agents, phones):
            if process is not None:
                process.stop()
    run.warnings = agents.warnings()
    daphne_log = workdir / "daphne.log"
    if daphne_log.exists():  # realtime.consumers: a ring's end that crossed the tab's ringing
        run.told_late = daphne_log.read_text(errors="replace").count("told by the phone group")
    run.tab = json.loads(out.read_text()) if out.exists() else {"errors": ["no result"]}
    _tally(run, number, t0, phones)
    return run


def _tally(run: RingRun, number, t0, phones: Sipp) -> None:
    calls = Call.objects.filter(number=number, direction="inbound", created_at__gte=t0)
    cancels = sipp_log.requests(phones.messages, "CANCEL")
    for call in calls.prefetch_related("legs"):
        legs = list(call.legs.all())
        won = [leg for leg in legs if leg.answered_at is not None]
        if call.outcome == "answered" and len(won) == 1:
            run.answered += 1
            entry = "tab" if won[0].kind == "browser" else f"phone {won[0].phone[-1]}"
            run.by_entry[entry] = run.by_entry.get(entry, 0) + 1
            want = call.caller_id[-1:]
            run.by_expected += entry == ("tab" if want == TAB_DIGIT else f"phone {want}")
        run.phones_answered_late += max(0, sum(1 for leg in won if leg.kind != "browser") - 1)
        for leg in legs:
            if leg.kind == "browser" or leg.answered_at is not None:
                continue
            run.legs_to_cancel += 1
            cancel = cancels.get(leg.sip_call_id)
            run.cancelled += cancel is not None
            run.with_reason += cancel is not None and REASON in cancel
    run.lost = run.calls - run.answered


def note(run: RingRun) -> str:
    """What the harness saw of a batch."""
    tab = run.tab
    entries = ", ".join(f"{k} {v}" for k, v in sorted(run.by_entry.items()))
    text = (f"{run.answered} of {run.calls} answered by exactly one entry ({entries}), "
            f"{run.by_expected} by the entry the caller's digit names; {run.agent_cpu:.1f} CPU "
            f"s over {run.wall:.0f} s; SIPp exit {run.caller_status} (callers), "
            f"{run.phones_status} (phones)")  # fmt: skip
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(tab.get("reasons", {}).items()))
    text += (
        f"; the tab rang {tab.get('rung', 0)} times (its {run.warmups} warm-up rings included), "
        f"answered "
        f"{len(tab.get('answered', []))} of the {tab.get('offered', 0)} it offered to take "
        f"and echoed {tab.get('heard', 0):,} packets; its rings ended: {reasons or 'none'}"
    )
    if run.told_late:
        text += (f" ({run.told_late} of them told by the phone group: Relay's ring had ended "
                 "before the tab's socket said it rang)")  # fmt: skip
    if tab.get("still_ringing"):
        text += f"; {tab['still_ringing']} of its rings never ended"
    if tab.get("never_ended"):
        text += f" (callers {', '.join(tab['never_ended'][:5])})"
    if tab.get("stopped"):
        text += f"; {int(tab['stopped'])} tab(s) stopped by the harness, not done"
    if tab.get("errors"):
        text += f"; tab errors: {tab['errors'][:2]}"
    if run.warnings:
        text += f"; {run.warnings} agent log lines at WARNING or above"
    if run.phones_answered_late:
        text += f"; {run.phones_answered_late} phones answered a call another entry won"
    if run.sip_drops:
        text += f"; the kernel dropped {run.sip_drops} datagrams at the agent's SIP socket"
    return text
