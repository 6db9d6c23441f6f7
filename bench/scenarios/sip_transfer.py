"""Issue 58's transfer scenario: forwarded calls whose phone hands each on by a blind transfer
(REFER, RFC 3515), on one agent; how long from the REFER leaving the phone to the
transfer's target ringing.

sip_transfer: SIPp places the calls at a steady rate (bench/sipp/forward_caller.xml) to the
number forwarding to one phone (fixtures.FORWARD_TARGET, sip_forward_cpu's). The trunk is
one SIPp (harness/sipp/transfer_phones.xml, the transfer tests' own): the phone answers
after 300 ms of ringing and, a second after its ACK, sends REFER with a Refer-To of
fixtures.TRANSFER_TARGET, takes the 202 and the NOTIFYs ("100 Trying", then "200 OK") and
Relay's BYE; the target rings 300 ms, answers and plays SIPp's capture until the caller
hangs up. The delay is read from that SIPp's message log alone (one process, one clock): the
phone's first REFER sent, to the target's INVITE received, which is the moment the target
starts ringing (SIPp sends its 180 at once); the two are paired by the ledger's legs of the
call (its phone leg's Call-ID and its transfer leg's).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from django.utils import timezone

from bench import fixtures, forward, sip, sipp_log
from bench.report import Row
from bench.scenarios.common import Bench, sip_start
from bench.stats import percentile
from calls.models import Call, Leg, LegRole
from calls.states import ACTIVE_STATES
from harness.live import wait_until
from harness.sip import Sipp, free_udp_port, notified, refer

REFER_AFTER_MS = 1000  # the phone's REFER, this long after its ACK
TALK_MS = 4000  # each caller hangs up this long after its answer (the phone's)
TARGET_MS = 300  # p95 target, ms


def _phone_steps() -> str:
    return refer(f"<tel:{fixtures.TRANSFER_TARGET}>", expect=202,
                 after_ms=REFER_AFTER_MS) + notified("100 Trying", "200 OK")  # fmt: skip


def _delays(calls, messages) -> tuple[list[float], int]:
    """Per call transferred: ms from the phone's REFER sent to the target's INVITE received,
    both in the trunk SIPp's log; and how many calls' transfer leg was answered."""
    refers = sipp_log.first_sent(messages, "REFER")
    invites = sipp_log.invites(messages)
    legs: dict = {}
    for call_id, role, sip_call_id, answered in Leg.objects.filter(call__in=calls).values_list(
        "call_id", "role", "sip_call_id", "answered_at"
    ):
        legs.setdefault(call_id, {})[role] = (sip_call_id, answered)
    delays, taken = [], 0
    for by_role in legs.values():
        phone, target = by_role.get(LegRole.FORWARD_TARGET), by_role.get(LegRole.TRANSFER_TARGET)
        if phone is None or target is None:
            continue
        taken += target[1] is not None
        if phone[0] in refers and target[0] in invites:
            delays.append((invites[target[0]].at - refers[phone[0]]) * 1000)
    return delays, taken


def sip_transfer(b: Bench) -> None:
    p = b.profile
    workdir = sip_start(b, "sip_transfer")
    n, rate = p.transfer_calls, p.transfer_rate
    number = fixtures.forwarding_number()
    trunk_port = free_udp_port()
    trunk = Sipp(workdir / "trunk", "transfer_phones", port=trunk_port, calls=2 * (1 + n),
                 timeout=180, phone=re.escape(fixtures.FORWARD_TARGET),
                 target=re.escape(fixtures.TRANSFER_TARGET), answer_ms=forward.ANSWER_MS,
                 phone_actions=_phone_steps(), relayer="none", target_actions="")  # fmt: skip
    agents = callers = None
    run = _Batch()
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{trunk_port}", count=1,
                            capacity=3 * (n + 1))  # fmt: skip
        agent_at = agents.env["SIP_BIND"]

        def place(name: str, count: int) -> Sipp:
            return Sipp(workdir / name, forward.CALLER_XML, port=free_udp_port(), calls=count,
                        timeout=150, remote=agent_at, service=number.number,
                        caller=forward.CALLER, media_port=sip.SIPP_MEDIA, play="",
                        talk_ms=TALK_MS, extra=("-l", str(count), "-r", str(rate)))  # fmt: skip

        warm = place("warm", 1)
        sip.sipp_exit(warm, deadline=60)
        warm.stop()
        up = Call.objects.filter(number=number, status__in=ACTIVE_STATES)
        wait_until(lambda: not up.exists(), deadline=30, what="the warm-up call to be recorded")
        t0, since = timezone.now(), forward.batch_start(agents)
        started = time.monotonic()
        callers = place("callers", n)
        forward.watch_bridges(number, t0, n, agents, deadline=n / rate + 60)
        forward.batch_end(run, agents, since)
        caller_status = sip.sipp_exit(callers, deadline=60)
        trunk_status = sip.sipp_exit(trunk, deadline=30)
        span = time.monotonic() - started
    finally:
        for process in (callers, agents, trunk):
            if process is not None:
                process.stop()
    calls = Call.objects.filter(number=number, direction="inbound", created_at__gte=t0)
    delays, taken = _delays(calls, trunk.messages)
    transferred = calls.filter(outcome="answered", legs__role=LegRole.TRANSFER_TARGET,
                               legs__answered_at__isnull=False).distinct().count()  # fmt: skip
    lost = n - min(taken, transferred)
    warnings = agents.warnings()
    b.keep_logs = b.keep_logs or lost > 0
    p95 = percentile(delays, 95)
    what = f"blind transfer (REFER) of {n} forwarded calls, {rate:g} a second"
    b.add(Row("sip_transfer", f"{what}: the phone's REFER to the target's first ring, p95",
              p95, "ms", target=f"<= {TARGET_MS} ms",
              met=bool(delays) and len(delays) == n and p95 <= TARGET_MS,
              server_cpu=run.agent_cpu / max(run.wall, 1e-9),
              note=f"{len(delays)} of {n} timed: p50 {percentile(delays, 50):.0f} ms, max "
              f"{percentile(delays, 100):.0f} ms; from the REFER SIPp (the phone) sent to the "
              "INVITE it (the target) received, one process's clock; "
              f"{run.agent_cpu / n * 1000:.0f} agent CPU ms per call over {span:.0f} s"
              + (f"; {warnings} agent log lines at WARNING or above" if warnings else "")
              + (f"; the kernel dropped {run.sip_drops} datagrams at the agent's SIP socket"
                 if run.sip_drops else "")))  # fmt: skip
    b.add(Row("sip_transfer", f"{what}: calls lost (not answered by the transfer's target)",
              lost, "lost", target="0", met=lost == 0,
              note=f"{transferred} of {n} recorded answered and transferred, {taken} transfer "
              f"legs answered; SIPp exit {caller_status} (callers), {trunk_status} "
              "(phone and target)"))  # fmt: skip


@dataclass
class _Batch:
    """What forward.batch_end fills: the agent's CPU and the wall clock over the batch, and
    the datagrams dropped at its SIP socket."""

    wall: float = 0.0
    agent_cpu: float = 0.0
    sip_drops: int = 0
