"""Issue 57's scenario: calls at once to a ring group, on one agent (bench/ring_group.py places
them), against the same agent bridging as many forwarded calls to one phone in the same run
(bench/forward.py).

sip_ring_group: a number's ring list rings `all` at once three phones through the trunk (one
SIPp, echoing) and its owner's console tab (bench/ring_tab.py, aiortc, Phone on). The callers'
numbers say which entry answers (their last digits go round 1, 2, 3, 4: phone 1, 2, 3, the
tab), so every entry wins some calls and is cancelled on the others. The baseline is a batch of
as many calls to a number forwarding to one phone (SIPp, echoing), on a fresh agent, the
callers saying the same talk.
"""

from __future__ import annotations

from bench import fixtures, forward, ring_group
from bench.report import Row
from bench.scenarios.common import Bench, alternated, sip_start


def sip_ring_group(b: Bench) -> None:
    p = b.profile
    workdir = sip_start(b, "sip_ring_group")
    n, talk = p.ring_group_calls, p.ring_group_talk_seconds
    talk_ms, play = forward.silent_talk(workdir, talk)
    base_runs: list[forward.Bridges] = []
    ring_runs: list[ring_group.RingRun] = []
    for r, kind in alternated(p.ring_group_rounds, "forwarded", "ring-group"):
        if kind == "forwarded":
            base_runs.append(forward.bridges(b, workdir / f"{kind}-{r}",
                                             fixtures.forwarding_number(), calls=n,
                                             talk_ms=talk_ms, capacity=2 * n,
                                             target_codec=forward.PCMU, echo=True,
                                             caller_play=play, deadline=120))  # fmt: skip
        else:
            ring_runs.append(ring_group.ring_calls(b, workdir / f"{kind}-{r}",
                                                   fixtures.ring_group_number(), calls=n,
                                                   talk_ms=talk_ms, caller_play=play,
                                                   deadline=120))  # fmt: skip
    phones = ring_group.ring_calls(b, workdir / "phones-only", fixtures.ring_group_number(),
                                   calls=n, talk_ms=talk_ms, caller_play=play, deadline=120,
                                   tab_answers=False)  # fmt: skip
    run = ring_group.merged(ring_runs)
    calls = run.calls
    base_cpu, base_wall = sum(x.agent_cpu for x in base_runs), sum(x.wall for x in base_runs)
    base_lost = sum(x.lost for x in base_runs)
    rounds = f"{n} at once, {len(ring_runs)} batch{'es' if len(ring_runs) != 1 else ''}"

    what = f"{n} calls at once to a ring group of 3 phones and 1 tab, `all`"
    base_ms = base_cpu / max(1, sum(x.calls for x in base_runs)) * 1000
    per_call = run.agent_cpu / calls * 1000
    b.add(Row("sip_ring_group", "agent CPU per forwarded call to one phone (the baseline)",
              base_ms, "CPU ms", server_cpu=base_cpu / base_wall,
              client_cpu=sum(x.load_cpu for x in base_runs) / base_wall,
              note=f"{rounds}, alternated with the ring group's; each caller (SIPp) talking "
              f"{talk:.0f} s in 20 ms packets to one phone (SIPp, PCMU) that echoes; "
              f"{forward.runs_note(base_runs)}"))  # fmt: skip
    b.add(Row("sip_ring_group", f"{what}: agent CPU per call", per_call, "CPU ms", base_ms,
              "forwarded call to one phone, same calls and talk",
              "<= 1.5x the forwarded call", per_call <= 1.5 * base_ms and run.lost == 0,
              run.agent_cpu / run.wall, run.load_cpu / run.wall,
              note=f"{rounds}; each call rings 3 phone legs and the tab at once; the winner is "
              f"bridged for the same {talk:.0f} s of talk (echoed by the phone, or by the tab "
              f"over DTLS-SRTP); {ring_group.note(run)}"))  # fmt: skip
    only_ms = phones.agent_cpu / n * 1000
    b.add(Row("sip_ring_group", f"{what}: agent CPU per call, the phones taking every call "
              "(the tab rings, answers none)", only_ms, "CPU ms", base_ms,
              "forwarded call to one phone, same calls and talk",
              server_cpu=phones.agent_cpu / phones.wall, client_cpu=phones.load_cpu / phones.wall,
              note="what ringing the list costs, without the browser-bridged calls: callers "
              f"ending in 1, 2, 3 in turn, so each phone takes a third; "
              f"{ring_group.note(phones)}"))  # fmt: skip
    b.add(Row("sip_ring_group", f"{what}: calls answered by one entry", run.answered, "calls",
              target=f"{calls} of {calls}", met=run.answered == run.by_expected == calls,
              note=f"recorded answered with exactly one leg answered; {run.by_expected} of "
              "them by the entry the caller's number names"))  # fmt: skip
    reasons = run.tab.get("reasons", {})
    tab_won = run.by_entry.get("tab", 0)
    tab_stopped = max(0, reasons.get("answered_elsewhere", 0) - run.warmups)  # not theirs
    expected = run.legs_to_cancel + calls - tab_won
    done = run.with_reason + tab_stopped
    b.add(Row("sip_ring_group", f"{what}: other entries cancelled", done, "entries",
              target=f"every one ({expected})", met=done == expected and expected > 0,
              note=f"{run.legs_to_cancel} phone legs not answered, {run.cancelled} got CANCEL, "
              f"{run.with_reason} with `{ring_group.REASON}`; the tab's ring stopped "
              f"`answered_elsewhere` on {tab_stopped} of the {calls - tab_won} calls it did not "
              "take"))  # fmt: skip
    tab_stopped = max(0, phones.tab.get("reasons", {}).get("answered_elsewhere", 0) - 1)
    expected_phones = phones.legs_to_cancel + n - phones.by_entry.get("tab", 0)
    done_phones = phones.with_reason + tab_stopped
    lost = run.lost + base_lost + phones.lost
    b.add(Row("sip_ring_group", "calls lost: not answered by one entry (or not bridged)", lost,
              "lost", target="0", met=lost == 0,
              note=f"{run.lost} to the ring group, {base_lost} forwarded, {phones.lost} to the "
              f"ring group with the phones taking every call (of whose other entries "
              f"{done_phones} of {expected_phones} were cancelled, the phones' CANCELs "
              "with the Reason)"))  # fmt: skip
    b.keep_logs = b.keep_logs or lost > 0 or (done, done_phones) != (expected, expected_phones)
