"""sip_scripted_100 (issue 41): scripted calls on one agent, each saying a sentence, waiting
for a key (a gather with an actionHook) and saying what the hook answers. The far end is
bench/rtpmeter.py's `keys` mode, which presses 1 once a call goes quiet and times the next
verb's first audio packet; the hook is a plain HTTP server on loopback in this process that
answers at once and times itself. In the same run, the same calls with the two sentences as
one message are the CPU baseline, legs alternated (scripted, message, message, scripted...)
so that the machine's drift hits both alike."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import fixtures, sip
from bench.report import Row
from bench.scenarios.common import Bench, VoiceApp, alternated, relay_urls
from bench.stats import percentile
from bench.wsload import ClientGroup

PROMPT = "Your appointment is tomorrow at nine. Press 1 to confirm."
THANKS = "Thank you. Goodbye."
SLACK_MS = 50  # the target: key to next audio, beyond the hook's own time


@dataclass
class ScriptLeg:
    scripted: bool
    calls: int
    completed: int = 0
    agent_cpu: float = 0.0  # CPU seconds, espeak-ng and sox included
    wall: float = 0.0
    delays_ms: list = field(default_factory=list)  # key -> next audio, per call that had one
    keyed: int = 0  # calls the meter pressed a key on
    gathered: int = 0  # calls whose gather heard the 1
    sipp_status: int | None = None
    submit_errors: str = ""  # error frames the submits got, by code


def _script(hook: str) -> list[dict]:
    return [
        {"say": {"text": PROMPT}},
        {"gather": {"numDigits": 1, "timeout": 10, "actionHook": hook}},
    ]


def _leg(b: Bench, workdir: Path, prefix: str, *, scripted: bool, calls: int,
         hook: VoiceApp) -> ScriptLeg:  # fmt: skip
    """One agent with room for every call, a warm-up call (the speech rendered), then `calls`
    calls at once, scripted or with the one message, until all have ended."""
    far_end = sip.FarEnd(workdir, secure=False, calls=1 + calls, timeout=300, metered=True,
                         keys=True)  # fmt: skip
    leg = ScriptLeg(scripted, calls)
    agents = None
    body = {"script": _script(hook.url)} if scripted else {"message": f"{PROMPT} {THANKS}"}
    try:
        agents = sip.Agents(b.env, workdir, trunk=far_end.trunk, count=1, capacity=calls + 1,
                            WEBHOOK_ALLOW_PRIVATE="true")  # fmt: skip
        with ClientGroup(relay_urls(b, 1), 1, {"mode": "submit"}, deadline=600) as group:
            group.ready(timeout=60)
            group.run({"calls": [{"callId": f"{prefix}warm", **body}]}, timeout=60)
            sip.watch(f"{prefix}warm", 1, agents, deadline=90)
            batch = [{"callId": f"{prefix}load-{i}", **body} for i in range(calls)]
            own0, tts0 = agents.cpu()
            started = time.monotonic()
            run = group.run({"calls": batch}, timeout=120)
            leg.submit_errors = ", ".join(f"{n} {code}" for code, n in run.errors().items())
            sip.watch(f"{prefix}load-", calls, agents, deadline=180)
            own1, tts1 = agents.cpu()
            leg.wall = time.monotonic() - started
        leg.agent_cpu = own1 - own0 + tts1 - tts0
        leg.sipp_status = sip.sipp_exit(far_end.sipp, deadline=60)
    finally:
        if agents is not None:
            agents.stop()
        far_end.stop()
    placed = sip.placed(f"{prefix}load-").values()
    leg.completed = sum(1 for call in placed if call.status == "completed")
    b.keep_logs = b.keep_logs or leg.completed < calls  # what went wrong is in the logs
    if scripted:
        from calls.models import CallEvent

        leg.gathered = CallEvent.objects.filter(
            call__call_id__startswith=f"{prefix}load-", kind="gathered",
            data__result__digits="1",
        ).count()  # fmt: skip
        # The warm-up call's stream is the meter's too: the first to go quiet, alone.
        streams = sorted(far_end.streams(), key=lambda s: s["key"] or math.inf)[1:]
        leg.keyed = sum(1 for s in streams if s["key"] is not None)
        leg.delays_ms = [s["delay_ms"] for s in streams if s["delay_ms"] is not None]
    return leg


def sip_scripted_100(b: Bench) -> None:
    p = b.profile
    fixtures.calls_reset()
    sip.check_no_worker()
    from django.test import override_settings

    from webhooks.services import webhook_delete, webhook_set

    # Hooks are signed with the user's webhook secret: the user of the bench's socket has one
    # while this runs (for an event its calls never send).
    user = fixtures.user(fixtures.WS_EMAIL.format(0))
    hook = VoiceApp([{"say": {"text": THANKS}}], "/confirm")
    with override_settings(WEBHOOK_ALLOW_PRIVATE=True):
        webhook_set(user=user, url=hook.url, events=["incoming_call"])
    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_scripted_100"
    stamp = int(time.time())
    legs: dict[bool, list[ScriptLeg]] = {True: [], False: []}
    try:
        for r, scripted in alternated(p.scripted_rounds, True, False):
            name = f"{'script' if scripted else 'message'}-{r}"
            legs[scripted].append(_leg(b, workdir / name, f"scripted-{stamp}-{name}-",
                                       scripted=scripted, calls=p.scripted_calls,
                                       hook=hook))  # fmt: skip
    finally:
        hook.stop()
        webhook_delete(user=user)
    _rows(b, legs, hook.times)


def _rows(b: Bench, legs: dict[bool, list[ScriptLeg]], hook_ms: list[float]) -> None:
    scripted, message = legs[True], legs[False]
    n = sum(leg.calls for leg in scripted)
    delays = [d for leg in scripted for d in leg.delays_ms]
    hook_p99 = percentile(hook_ms, 99)
    p99 = percentile(delays, 99)
    keyed, gathered = sum(leg.keyed for leg in scripted), sum(leg.gathered for leg in scripted)
    completed = sum(leg.completed for leg in scripted)
    calls_at_once = scripted[0].calls if scripted else 0
    b.add(Row("sip_scripted_100", f"{calls_at_once} scripted calls at once on one agent: key "
              "to the next verb's first audio, p99", p99, "ms",
              target=f"<= {SLACK_MS} ms + the hook's p99 ({hook_p99:.1f} ms)",
              met=len(delays) == n and p99 <= SLACK_MS + hook_p99,
              note=f"p50 {percentile(delays, 50):.1f} ms, max {max(delays, default=math.nan):.1f}"
              f" ms; {len(delays)} of {n} calls timed; {keyed} keys pressed, {gathered} "
              f"gathers heard them, {completed} calls completed; the hook's own time p50 "
              f"{percentile(hook_ms, 50):.2f} ms over {len(hook_ms)} requests; SIPp exit "
              f"{'/'.join(str(leg.sipp_status) for leg in scripted)}"
              + "".join(f"; submit errors: {leg.submit_errors}" for leg in scripted
                        if leg.submit_errors)))  # fmt: skip
    per = {}
    for kind, runs in legs.items():
        calls = sum(leg.calls for leg in runs)
        per[kind] = sum(leg.agent_cpu for leg in runs) / calls * 1000 if calls else math.nan
    ratio = per[True] / per[False] if per[False] else math.nan
    b.add(Row("sip_scripted_100", "agent CPU per scripted call (say, gather, hook, say)",
              per[True], "CPU ms", per[False], "the same sentences as one message",
              "<= 1.3x", ratio <= 1.3,
              note=f"{len(scripted)} leg(s) of each, alternated; "
              f"{sum(leg.completed for leg in message)} of "
              f"{sum(leg.calls for leg in message)} message calls completed"))  # fmt: skip
