"""Issue 58's scenario: recorded bridged calls at once on one agent, against the same agent
bridging as many unrecorded forwarded calls in the same run (bench/forward.py places both).

sip_recorded: a number forwarding to one phone (SIPp on the trunk, echoing) with recording
on: each call's parties hear the announcement (from the speech cache), then the bridge is
recorded into a stereo WAV (telephony/sip/recorder.py). The baseline is the same number with
recording off, on a fresh agent, the callers saying the same talk; the two kinds alternate.
Every recording is read back: complete, and its WAV's length (its header's frames) against
its bridge's length as the agent logged it.
"""

from __future__ import annotations

import json
import re
import wave
from datetime import UTC, datetime
from pathlib import Path

from bench import fixtures, forward
from bench.report import Row
from bench.scenarios.common import Bench, alternated, sip_start
from calls.models import Recording, RecordingKind

RECORDED = re.compile(
    r"inbound call (?P<call_id>\S+): recorded (?P<seconds>[\d.]+) s of a "
    r"(?P<bridge>[\d.]+) s bridge"
)


def _number(*, recording: bool):
    number = fixtures.forwarding_number()
    number.recording_enabled = recording
    number.save(update_fields=["recording_enabled"])
    return number


def _recordings_dir(b: Bench) -> Path:
    options = json.loads(b.env.get("RECORDING_STORAGE_OPTIONS") or "{}")
    return Path(options.get("location") or Path(b.env["RELAY_VAR_DIR"]) / "recordings")


def _check(b: Bench, workdir: Path, run: forward.Bridges, number) -> dict:
    """The batch's recordings read back: how many, complete, and the worst difference between
    a WAV's length and its bridge's (the agent's log line of the recording)."""
    bridges = {}
    for log in workdir.rglob("*.log"):
        for found in RECORDED.finditer(log.read_text(errors="replace")):
            bridges[found["call_id"]] = float(found["bridge"])
    rows = Recording.objects.filter(
        kind=RecordingKind.CALL, call__number=number, created_at__gte=forward_start(run)
    ).values_list("name", "incomplete", "call__sip_call_id")
    where, worst, complete, read = _recordings_dir(b), 0.0, 0, 0
    for name, incomplete, call_id in rows:
        complete += not incomplete
        try:
            with wave.open(str(where / name)) as wav:
                seconds = wav.getnframes() / wav.getframerate()
        except (OSError, wave.Error):
            continue
        if call_id in bridges:
            read += 1
            worst = max(worst, abs(seconds - bridges[call_id]))
    return {"recordings": len(rows), "complete": complete, "read": read, "worst": worst}


def forward_start(run: forward.Bridges) -> datetime:
    return datetime.fromtimestamp(run.started_at, tz=UTC)


def sip_recorded(b: Bench) -> None:
    p = b.profile
    workdir = sip_start(b, "sip_recorded")
    n, talk = p.recorded_calls, p.recorded_talk_seconds
    talk_ms, play = forward.silent_talk(workdir, talk)
    base_runs: list[forward.Bridges] = []
    recorded_runs: list[tuple[forward.Bridges, dict]] = []
    for r, kind in alternated(p.recorded_rounds, "unrecorded", "recorded"):
        number = _number(recording=kind == "recorded")
        run = forward.bridges(b, workdir / f"{kind}-{r}", number, calls=n, talk_ms=talk_ms,
                              capacity=2 * n, target_codec=forward.PCMU, echo=True,
                              caller_play=play, deadline=120)  # fmt: skip
        if kind == "recorded":
            recorded_runs.append((run, _check(b, workdir / f"{kind}-{r}", run, number)))
        else:
            base_runs.append(run)
    _number(recording=False)
    runs = [run for run, _ in recorded_runs]
    checks = [check for _, check in recorded_runs]
    calls = sum(r.calls for r in runs)
    base_cpu, base_wall = sum(x.agent_cpu for x in base_runs), sum(x.wall for x in base_runs)
    cpu, wall = sum(x.agent_cpu for x in runs), sum(x.wall for x in runs)
    base_ms = base_cpu / max(1, sum(x.calls for x in base_runs)) * 1000
    per_call = cpu / max(1, calls) * 1000
    lost = sum(x.lost for x in runs)
    recordings = sum(c["recordings"] for c in checks)
    complete = sum(c["complete"] for c in checks)
    read = sum(c["read"] for c in checks)
    worst = max((c["worst"] for c in checks), default=float("nan"))
    rounds = f"{n} at once, {len(runs)} batch{'es' if len(runs) != 1 else ''}"
    what = f"{n} recorded bridged calls at once on one agent"
    b.add(Row("sip_recorded", "agent CPU per unrecorded forwarded call (the baseline)", base_ms,
              "CPU ms", server_cpu=base_cpu / max(base_wall, 1e-9),
              client_cpu=sum(x.load_cpu for x in base_runs) / max(base_wall, 1e-9),
              note=f"{rounds}, alternated with the recorded ones; each caller (SIPp) talking "
              f"{talk:.0f} s in 20 ms packets to one phone (SIPp, PCMU) that echoes; "
              f"{forward.runs_note(base_runs)}"))  # fmt: skip
    b.add(Row("sip_recorded", f"{what}: agent CPU per call", per_call, "CPU ms", base_ms,
              "unrecorded forwarded call, same calls and talk", "<= 1.3x the unrecorded call",
              per_call <= 1.3 * base_ms and lost == 0, cpu / max(wall, 1e-9),
              sum(x.load_cpu for x in runs) / max(wall, 1e-9),
              note=f"{rounds}; both parties hear the announcement (the speech cache), then the "
              "bridge is recorded, one stereo WAV a call written every second; the bridge is "
              f"the announcement's length shorter than the baseline's; "
              f"{forward.runs_note(runs)}"))  # fmt: skip
    b.add(Row("sip_recorded", f"{what}: calls lost", lost, "lost", target="0", met=lost == 0,
              note=f"{recordings} recordings of {calls} calls, {complete} complete"))  # fmt: skip
    b.add(Row("sip_recorded", f"{what}: each WAV's length against its bridge, the worst",
              worst, "s", target="<= 0.1 s", met=read == calls and worst <= 0.1,
              note=f"{read} of {calls} WAVs read back and matched to the agent's log line of "
              "their bridge (a WAV's frames from its header)"))  # fmt: skip
    b.keep_logs = b.keep_logs or lost > 0 or read != calls
