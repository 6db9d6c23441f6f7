"""http_logins (issues 6 and 29): a login alone, logins at once against the host's hashing
slots, number creations at once, and a flood of logins with /me probed beside it. The bursts are
written by bench/burst.py rather than wrk, each request on a connection of its own, so that the
wait in the listen backlog for a free worker is in each figure."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import Counter
from pathlib import Path

from bench import burst, fixtures, wrk
from bench.report import Row
from bench.scenarios.common import Bench, CpuMeter
from bench.scenarios.http import http_errors, plain_alone
from bench.stats import percentile

LOGIN = "/api/auth/login"
FLOOD_LEAD = 1.0  # seconds the /me probe runs alone before the flood, and after its end
BURST_PAUSE = 0.5  # between two bursts of logins at once


def http_logins(b: Bench) -> None:
    p = b.profile
    # The hash-time of the targets below: enough checks for a steady median.
    checks = fixtures.argon2_verify_ms(max(10, p.history_sql_runs))
    argon2_ms = percentile(checks, 50)
    # Unmeasured: every worker opens its database connection and loads the login path first, as it
    # has when http_logins runs after http_bare_asgi, http_me and http_history (a run --only
    # http_logins starts it on fresh workers).
    wrk.run(b.relay.http.base + LOGIN, seconds=1, connections=2, threads=1, **_login())
    alone = _login_alone(b, argon2_ms)
    _logins_at_once(b, argon2_ms, alone.p50_ms)
    _numbers_at_once(b)
    _login_flood(b, alone.p50_ms)
    b.add(Row("http_logins", "Argon2 check_password alone, one thread: checks/s", 1000 / argon2_ms,
              "checks/s", note=f"median {argon2_ms:.1f} ms each: the hash-time of the "
              "targets above"))  # fmt: skip


def _login() -> dict:
    """wrk's arguments for a real login of the HTTP user (Argon2, then a session row)."""
    body = json.dumps({"email": fixtures.HTTP_EMAIL, "password": fixtures.PASSWORD})
    return {"method": "POST", "body": body, "headers": {"Content-Type": "application/json"}}


def _login_request(email: str) -> dict:
    """A real login of `email` (Argon2, then a session row), for bench/burst.py."""
    body = json.dumps({"email": email, "password": fixtures.PASSWORD})
    return {"method": "POST", "path": LOGIN, "headers": {"Content-Type": "application/json"},
            "body": body}  # fmt: skip


def _login_alone(b: Bench, argon2_ms: float) -> wrk.WrkResult:
    """One connection, closed loop: each login timed alone, never queued for the slot."""
    p = b.profile
    plain = plain_alone(b)
    with CpuMeter(b.relay.http) as cpu:
        run = wrk.run(b.relay.http.base + LOGIN, seconds=p.http_seconds, connections=1,
                      threads=1, **_login())  # fmt: skip
    note = http_errors(
        run,
        f"{run.requests:,} logins, p99 {run.p99_ms:.0f} ms; Argon2 alone {argon2_ms:.0f} ms; "
        "one at a time, so none waits in the hashing queue",
    )
    b.add(Row("http_logins", "POST /api/auth/login, one at a time: p50", run.p50_ms, "ms",
              plain.p50_ms, "plain Django view, one connection", "<= 50 ms",
              run.p50_ms <= 50, cpu.value, run.client_cpu, note))  # fmt: skip
    return run


def _slot_hold_ms(b: Bench) -> float:
    """The hashing queue's own average of how long a slot is held (core/passwords.py keeps
    it in its state file, a moving average over the last holds), in ms; NaN if unreadable."""
    state = Path(b.env["RELAY_VAR_DIR"]) / "hashing-slots" / "queue" / "state"
    try:
        return float(state.read_text().split()[1]) * 1000
    except (OSError, IndexError, ValueError):
        return math.nan


def _statuses(answers: list[burst.Answer]) -> str:
    """'12 answered 200, 4 answered 503 service_unavailable', by status then error code."""
    counts = Counter((a.status, a.code) for a in answers)
    parts = []
    for (status, code), n in sorted(counts.items()):
        what = "no answer" if status == 0 else f"answered {status}" + (f" {code}" if code else "")
        parts.append(f"{n:,} {what}")
    return ", ".join(parts)


def _slots() -> str:
    from django.conf import settings

    slots = settings.PASSWORD_HASH_CONCURRENCY
    return f"{slots} hashing slot{'s' if slots != 1 else ''}"


def _logins_at_once(b: Bench, argon2_ms: float, login_ms: float) -> None:
    """Issue 29: as many logins as the profile says, each a user of its own, all written at
    the same moment on connections of their own, against the host's hashing slot(s). None
    may be refused, and the last must be answered within that many hash-times + 50 ms."""
    p = b.profile
    n = p.logins_at_once
    requests = [_login_request(email) for email in fixtures.login_emails(n)]
    runs = []
    with CpuMeter(b.relay.http) as cpu:
        for r in range(p.logins_at_once_rounds):
            if r:
                time.sleep(BURST_PAUSE)
            runs.append(burst.run({"port": b.relay.http.port, "burst": requests}))
    answers = [a for run in runs for a in run.burst]
    refused = sum(1 for a in answers if a.status == 503)
    ok = sum(1 for a in answers if a.status == 200)
    latencies = [a.ms for a in answers]
    load = statistics.fmean(run.client_cpu for run in runs)
    written = max(_written_within_ms(run) for run in runs)
    what = f"{n} logins at once ({n} users, one request each, {_slots()})"
    rounds = f"{len(runs)} burst{'s' if len(runs) != 1 else ''} of {n}"
    b.add(Row("http_logins", f"{what}: refused", refused, "refused", target="0",
              met=refused == 0 and ok == len(answers), server_cpu=cpu.value, client_cpu=load,
              note=f"{rounds}, each written within {written:.1f} ms: "
              f"{_statuses(answers)}"))  # fmt: skip
    p99 = percentile(latencies, 99)
    target_ms = n * argon2_ms + 50
    slowest = ", ".join(f"{max(a.ms for a in run.burst):.0f}" for run in runs)
    # Answers leave one slot hold apart: the spread of a burst's answers over n - 1 is what
    # a login costs in the queue, to set beside the hash-time.
    step = statistics.median(
        (max(a.ms for a in run.burst) - min(a.ms for a in run.burst)) / max(1, n - 1)
        for run in runs
    )
    b.add(Row("http_logins", f"{what}: p99", p99, "ms", argon2_ms, "Argon2 check_password alone",
              f"<= {n} hash-times + 50 ms ({target_ms:.0f} ms)", p99 <= target_ms, cpu.value,
              load, note=f"p50 {percentile(latencies, 50):.0f} ms; slowest of each burst "
              f"{slowest} ms; one answer every {step:.1f} ms (median over the bursts of "
              f"(slowest - fastest) / {n - 1}); the queue's average slot hold after them "
              f"{_slot_hold_ms(b):.1f} ms; with the login alone's p50 ({login_ms:.1f} ms) as "
              f"the hash-time the target would be {n * login_ms + 50:.0f} ms"))  # fmt: skip


def _written_within_ms(run: burst.BurstRun) -> float:
    """How far apart the first and the last request of a burst were written."""
    sent = [a.sent for a in run.burst]
    return (max(sent) - min(sent)) * 1000 if sent else math.nan


def _numbers_at_once(b: Bench) -> None:
    """Issue 29: one user with no number sends one creation more than the plan allows, all
    at the same moment, each with a CAPTCHA token of its own: the plan's numbers are created,
    the one past it is refused `number_limit_reached`, and none is turned away 503 by the
    hashing queue (each creation hashes its PIN)."""
    from django.conf import settings

    limit = settings.PLAN_NUMBER_LIMITS["free"]
    n = limit + 1
    account = fixtures.numbers_account(stock=n)
    headers = {"Content-Type": "application/json",
               "Authorization": f"Bearer {fixtures.token_for(account)}"}  # fmt: skip
    tokens = fixtures.captcha_tokens(n)
    requests = [
        {"method": "POST", "path": "/api/numbers", "headers": headers,
         "body": json.dumps({"alias": f"bench {i}", "pin": "4821", "captchaToken": token})}
        for i, token in enumerate(tokens)
    ]  # fmt: skip
    with CpuMeter(b.relay.http) as cpu:
        run = burst.run({"port": b.relay.http.port, "burst": requests})
    created = sum(1 for a in run.burst if a.status == 201)
    limited = sum(1 for a in run.burst if a.code == "number_limit_reached")
    busy = sum(1 for a in run.burst if a.status == 503)
    held = fixtures.numbers_held(account)
    spent = fixtures.captcha_tokens_spent(tokens)  # a refused creation spends none
    latencies = sorted(a.ms for a in run.burst)
    b.add(
        Row(
            "http_logins",
            f"{n} number creations at once by one user (plan limit {limit}, a CAPTCHA "
            "token each): numbers created",
            created,
            "numbers",
            target=f"{limit} created, {n - limit} number_limit_reached, no 503",
            met=created == held == spent == limit and limited == n - limit and busy == 0,
            server_cpu=cpu.value,
            client_cpu=run.client_cpu,
            note=f"{_statuses(run.burst)}; the user holds {held} afterwards, {spent} of the "
            f"{n} tokens are spent; answered in "
            + ", ".join(f"{ms:.0f}" for ms in latencies)
            + " ms",
        )
    )


def _login_flood(b: Bench, login_ms: float) -> None:
    """Issue 29: the profile's flood of logins (distinct users) written at the same moment,
    with /me probed open loop at a moderate rate from a second before it to a second after
    its last answer; the same probe alone just before is the baseline. The hashing queue
    takes what fits in its bound, the rest is to be refused at once, and /me served as
    usual."""
    p = b.profile
    port = b.relay.http.port
    probe = {"path": "/api/user/me", "headers": {"Authorization": f"Bearer {b.http_token}"},
             "rate": p.flood_me_rate}  # fmt: skip
    requests = [_login_request(email) for email in fixtures.login_emails(p.login_flood)]
    quiet = burst.run({"port": port, "probe": probe, "seconds": p.http_seconds})
    with CpuMeter(b.relay.http) as cpu:
        flood = burst.run({"port": port, "probe": probe, "lead": FLOOD_LEAD, "tail": FLOOD_LEAD,
                           "burst": requests})  # fmt: skip
    span = flood.burst_end - flood.burst_at
    during = [a for a in flood.probes if flood.burst_at <= a.sent <= flood.burst_end]
    quiet_ms = [a.ms for a in quiet.probes]
    busy_ms = [a.ms for a in during]
    where = (f"GET /api/user/me (JWT) at {p.flood_me_rate:,.0f} req/s during {p.login_flood} "
             "logins at once")  # fmt: skip
    base = "same probe, no flood"
    failed = sum(1 for a in during if a.status != 200)
    b.add(
        Row(
            "http_logins",
            f"{where}: p50",
            percentile(busy_ms, 50),
            "ms",
            percentile(quiet_ms, 50),
            base,
            server_cpu=cpu.value,
            client_cpu=flood.client_cpu,
            note=f"{len(during)} probes within the flood's {span:.2f} s"
            + (f", {failed} not answered 200" if failed else "")
            + f"; quiet: {len(quiet_ms)} probes in {p.http_seconds:.0f} s",
        )
    )
    p99 = percentile(busy_ms, 99)
    b.add(
        Row(
            "http_logins",
            f"{where}: p99",
            p99,
            "ms",
            percentile(quiet_ms, 99),
            base,
            "<= 2x quiet",
            p99 <= 2 * percentile(quiet_ms, 99),
            cpu.value,
            flood.client_cpu,
            note=f"max {percentile(busy_ms, 100):,.0f} ms",
        )
    )
    _flood_rows(b, flood, cpu.value, login_ms)


def _flood_rows(b: Bench, flood: burst.BurstRun, server_cpu: float, login_ms: float) -> None:
    """The flood's own answers: how many were refused, how long any login waited for its
    answer (the queue's promise: served within PASSWORD_HASH_WAIT_SECONDS, or refused at
    once), and how many logins a second the slot served."""
    from django.conf import settings

    n = len(flood.burst)
    span = flood.burst_end - flood.burst_at
    ok = [a.ms for a in flood.burst if a.status == 200]
    refused = [a.ms for a in flood.burst if a.status == 503]
    retry = Counter(a.retry_after for a in flood.burst if a.status == 503)
    note = (f"{_statuses(flood.burst)}; written within {_written_within_ms(flood):.1f} ms, the "
            f"last answered {span:.2f} s after the first write; the queue refuses a login at "
            f"once when {settings.PASSWORD_HASH_QUEUE_MAX} already wait "
            "(PASSWORD_HASH_QUEUE_MAX) or more than fit in PASSWORD_HASH_WAIT_SECONDS "
            f"({settings.PASSWORD_HASH_WAIT_SECONDS:g} s)")  # fmt: skip
    if retry:
        note += "; Retry-After " + ", ".join(f"{s} s x{k}" for s, k in sorted(retry.items()))
    b.add(Row("http_logins", f"{n} logins at once: refused (503)", len(refused), "refused",
              server_cpu=server_cpu, client_cpu=flood.client_cpu, note=note))  # fmt: skip
    every = [a.ms for a in flood.burst]
    wait_ms = settings.PASSWORD_HASH_WAIT_SECONDS * 1000
    split = (f"the refused: p50 {percentile(refused, 50):,.0f} ms, p99 "
             f"{percentile(refused, 99):,.0f} ms" if refused else "none refused")  # fmt: skip
    p99 = percentile(every, 99)
    b.add(
        Row(
            "http_logins",
            f"{n} logins at once: p99 of every answer, served or refused",
            p99,
            "ms",
            login_ms,
            "one login alone, p50",
            f"<= {wait_ms:,.0f} ms (PASSWORD_HASH_WAIT_SECONDS): served within the wait or "
            "refused at once",
            p99 <= wait_ms,
            server_cpu,
            flood.client_cpu,
            note=f"p50 {percentile(every, 50):,.0f} ms; {split}; the served: p50 "
            f"{percentile(ok, 50):,.0f} ms, p99 {percentile(ok, 99):,.0f} ms",
        )
    )
    b.add(Row("http_logins", f"{n} logins at once: successful logins/s", len(ok) / max(span, 1e-6),
              "req/s", server_cpu=server_cpu, client_cpu=flood.client_cpu,
              note=f"{len(ok)} in {span:.2f} s; the queue's average slot hold after them "
              f"{_slot_hold_ms(b):.1f} ms"))  # fmt: skip
