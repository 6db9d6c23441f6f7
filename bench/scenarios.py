"""the http_* scenarios, the ws_* scenarios (issue 6) and sip_50_calls (real calls over SIP). Each
appends Rows to the Bench; none decides pass or fail of the run: a missed target is a finding, only
a scenario that cannot run is an error."""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import statistics
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench import burst, fixtures, forward, procs, sip, wrk
from bench.profiles import Profile
from bench.report import Row
from bench.wsload import ClientGroup, percentile
from tests.live import http, manage


@dataclass
class Bench:
    profile: Profile
    env: dict
    embedded_env: dict  # embedded_me's: no DATABASE_URL, REDIS_URL or SECRET_KEY, Relay's defaults
    bare: procs.Server
    plain: procs.Server  # bench/plain_urls.py under gunicorn, configured as Relay's is
    relay: procs.Relay  # runrelay: gunicorn on relay.http, Daphne on relay.ws
    http_token: str = ""
    api_key: str = ""
    history_account: object = None
    history_token: str = ""
    ws: list = field(default_factory=list)  # (JWT, user id) of distinct users
    rows: list = field(default_factory=list)
    http_bare_asgi_rps: float = math.nan
    plain_alone: wrk.WrkResult | None = (
        None  # the plain view on one connection (http_history, http_logins)
    )
    ws_ping_relay: dict = field(default_factory=dict)  # (connections, rate or "sat") -> figures
    keep_logs: bool = False  # a scenario lost calls: run.py keeps the servers' logs

    def add(self, row: Row) -> None:
        self.rows.append(row)


class CpuMeter:
    """A server's CPU seconds per wall second across a `with` block."""

    def __init__(self, server):
        self.server = server
        self.value = math.nan

    def __enter__(self):
        self._cpu, self._t = self.server.cpu_seconds(), time.monotonic()
        return self

    def __exit__(self, *exc):
        self.value = (self.server.cpu_seconds() - self._cpu) / (time.monotonic() - self._t)


def _paced_connections(rate: float) -> int:
    # About 200 ms between a connection's requests, so a response's own latency (which wrk's
    # delay() adds to the gap) costs little of the intended rate.
    return max(2, math.ceil(rate / 5))


# --- the http_* scenarios: HTTP under wrk ---------------------------------------------------------
def http_bare_asgi(b: Bench) -> None:
    p = b.profile
    with CpuMeter(b.bare) as cpu:
        daphne = wrk.run(b.bare.base + "/", seconds=p.http_seconds,
                         connections=p.saturation_connections)  # fmt: skip
    uvicorn_server = procs.uvicorn("uvicorn-bare", "bench.bare_app:app", b.env)
    try:
        with CpuMeter(uvicorn_server) as ucpu:
            uv = wrk.run(uvicorn_server.base + "/", seconds=p.http_seconds,
                         connections=p.saturation_connections)  # fmt: skip
    finally:
        uvicorn_server.stop()
    b.http_bare_asgi_rps = daphne.rps
    b.add(Row("http_bare_asgi", "bare ASGI JSON, Daphne: req/s at saturation", daphne.rps, "req/s",
              uv.rps, "same app, uvicorn", server_cpu=cpu.value,
              client_cpu=daphne.client_cpu))  # fmt: skip
    b.add(Row("http_bare_asgi", "bare ASGI JSON, uvicorn (reference): req/s", uv.rps, "req/s",
              daphne.rps, "same app, Daphne", server_cpu=ucpu.value,
              client_cpu=uv.client_cpu))  # fmt: skip


PLAIN = "plain Django view, same gunicorn"


def http_me(b: Bench) -> None:
    p = b.profile
    plain = _plain_saturation(b)
    url = b.relay.http.base + "/api/user/me"
    for label, headers in (
        ("JWT", {"Authorization": f"Bearer {b.http_token}"}),
        ("API key", {"X-API-Key": b.api_key}),
    ):
        with CpuMeter(b.relay.http) as cpu:
            sat = wrk.run(url, seconds=p.http_seconds, connections=p.saturation_connections,
                          headers=headers)  # fmt: skip
        b.add(Row("http_me", f"GET /api/user/me ({label}): req/s at saturation", sat.rps, "req/s",
                  plain.rps, PLAIN, ">= 50% of the plain view", sat.rps >= plain.rps / 2,
                  cpu.value, sat.client_cpu, _http_errors(sat)))  # fmt: skip
        _http_me_half_load(b, label, url, headers, sat.rps / 2)


def _plain_saturation(b: Bench) -> wrk.WrkResult:
    """The plain Django view's req/s at saturation: the ceiling Relay's endpoints are set
    against, beside http_bare_asgi's bare ASGI app for context."""
    p = b.profile
    with CpuMeter(b.plain) as cpu:
        plain = wrk.run(b.plain.base + "/plain", seconds=p.http_seconds,
                        connections=p.saturation_connections)  # fmt: skip
    b.add(
        Row(
            "http_me",
            "plain Django JsonResponse view, gunicorn: req/s at saturation",
            plain.rps,
            "req/s",
            b.http_bare_asgi_rps,
            "http_bare_asgi bare ASGI app, Daphne",
            server_cpu=cpu.value,
            client_cpu=plain.client_cpu,
            note=_http_errors(plain),
        )
    )
    return plain


def _http_me_half_load(b: Bench, label: str, url: str, headers: dict, half: float) -> None:
    """/me paced at `half` req/s, and the plain view at the same rate and connections."""
    p = b.profile
    conns = _paced_connections(half)
    with CpuMeter(b.relay.http) as cpu:
        run = wrk.run(url, seconds=p.http_seconds, connections=conns, rate=half,
                      headers=headers)  # fmt: skip
    base = wrk.run(b.plain.base + "/plain", seconds=p.http_seconds, connections=conns, rate=half)
    note = _http_errors(run, f"{run.rps:,.0f} req/s achieved of {half:,.0f}")
    b.add(Row("http_me", f"GET /api/user/me ({label}): p50 at half load", run.p50_ms, "ms",
              base.p50_ms, "plain Django view, same rate", server_cpu=cpu.value,
              client_cpu=run.client_cpu, note=note))  # fmt: skip
    b.add(Row("http_me", f"GET /api/user/me ({label}): p99 at half load", run.p99_ms, "ms",
              base.p99_ms, "plain Django view, same rate", "<= 10 ms", run.p99_ms <= 10,
              cpu.value, run.client_cpu))  # fmt: skip


def _http_errors(result: wrk.WrkResult, note: str = "") -> str:
    """`note`, followed by what of `result` was not a 2xx answer, if any."""
    bad = []
    if result.non2xx:
        bad.append(f"{result.non2xx:,} non-2xx")
    if result.errors:
        bad.append(f"{result.errors:,} socket errors")
    return "; ".join(part for part in (note, ", ".join(bad)) if part)


# http_history targets (issue 15): page 1 and a keyset page at any depth as cheap as each other, and
# a deep OFFSET, which must walk the rows it skips, within 100 ms.
http_history_TARGET_MS = {"first": 5, "offset": 100, "keyset": 5}
HTTP_HISTORY_BASELINE = "raw SQL counter sum + page, psycopg"


def http_history(b: Bench) -> None:
    p = b.profile
    headers = {"Authorization": f"Bearer {b.history_token}"}
    for status, deep in p.history_offsets.items():
        cursor = fixtures.history_cursor(b.history_account, status=status, depth=deep)
        pages = [
            ("first", "offset=0", 0, None),
            ("offset", f"offset={deep}", deep, None),
            ("keyset", f"before={cursor}", 0, cursor),
        ]
        for kind, where, offset, before in pages:
            query = f"limit=50&{where}" + (f"&status={status}" if status else "")
            # One connection, closed loop: the latency of one request at a time.
            with CpuMeter(b.relay.http) as cpu:
                run = wrk.run(f"{b.relay.http.base}/api/history?{query}", seconds=p.http_seconds,
                              connections=1, threads=1, headers=headers)  # fmt: skip
            sql = fixtures.history_sql_ms(b.history_account, status=status, offset=offset,
                                          runs=p.history_sql_runs, before=before)  # fmt: skip
            place = f"offset={offset:,}" if kind != "keyset" else f"before=<cursor at {deep:,}>"
            label = f"GET /api/history status={status or 'all'} {place}"
            target_ms = http_history_TARGET_MS[kind]
            note = _http_errors(run, f"{run.requests:,} requests")
            b.add(
                Row(
                    "http_history",
                    f"{label}: p50",
                    run.p50_ms,
                    "ms",
                    percentile(sql, 50),
                    HTTP_HISTORY_BASELINE,
                    f"<= {target_ms} ms",
                    run.p50_ms <= target_ms,
                    cpu.value,
                    run.client_cpu,
                    note,
                )
            )
            b.add(
                Row(
                    "http_history",
                    f"{label}: p99",
                    run.p99_ms,
                    "ms",
                    percentile(sql, 99),
                    HTTP_HISTORY_BASELINE,
                    server_cpu=cpu.value,
                    client_cpu=run.client_cpu,
                )
            )
    _plain_alone_row(b, "http_history")


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


def _plain_alone(b: Bench) -> wrk.WrkResult:
    """The plain Django view on one connection, closed loop: measured once, for http_history and
    http_logins."""
    if b.plain_alone is None:
        b.plain_alone = wrk.run(b.plain.base + "/plain", seconds=b.profile.http_seconds,
                                connections=1, threads=1)  # fmt: skip
    return b.plain_alone


def _plain_alone_row(b: Bench, scenario: str) -> None:
    plain = _plain_alone(b)
    b.add(Row(scenario, "plain Django view, gunicorn, one connection: p50", plain.p50_ms, "ms",
              note=f"p99 {plain.p99_ms:.2f} ms: the framework's floor under the same "
              "server"))  # fmt: skip


def _login_alone(b: Bench, argon2_ms: float) -> wrk.WrkResult:
    """One connection, closed loop: each login timed alone, never queued for the slot."""
    p = b.profile
    plain = _plain_alone(b)
    with CpuMeter(b.relay.http) as cpu:
        run = wrk.run(b.relay.http.base + LOGIN, seconds=p.http_seconds, connections=1,
                      threads=1, **_login())  # fmt: skip
    note = _http_errors(
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


# --- embedded_me: the embedded default, as `make run` starts it -----------------------------------
def embedded_me(b: Bench) -> None:
    """runrelay with no DATABASE_URL or REDIS_URL (SQLite under its own RELAY_VAR_DIR, the
    embedded Redis), a user registered over the API, /me at saturation; the plain Django
    view under a gunicorn with the same environment beside it."""
    p = b.profile
    env = _embedded_var_dir(b, "embedded_me")
    with contextlib.ExitStack() as servers:
        relay, plain_server = procs.start_together(
            servers,
            lambda: procs.Relay(env, log_name="runrelay-embedded_me"),
            lambda: procs.gunicorn_plain("gunicorn-plain-embedded_me", env),
        )
        token = _register(relay.http.base)
        with CpuMeter(relay.http) as cpu:
            run = wrk.run(relay.http.base + "/api/user/me", seconds=p.http_seconds,
                          connections=p.saturation_connections,
                          headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        plain = wrk.run(plain_server.base + "/plain", seconds=p.http_seconds,
                        connections=p.saturation_connections)  # fmt: skip
    b.add(Row("embedded_me", "GET /api/user/me (JWT), embedded default (SQLite, embedded Redis): "
              "req/s at saturation", run.rps, "req/s", plain.rps, "plain Django view, same "
              "environment", ">= 600 req/s", run.rps >= 600, cpu.value, run.client_cpu,
              _http_errors(run)))  # fmt: skip


def _embedded_var_dir(b: Bench, name: str) -> dict:
    """A RELAY_VAR_DIR of its own with `make run`'s secret and /metrics token files, migrated
    as `make run` migrates it; the environment that points at it."""
    var_dir = Path(b.env["RELAY_VAR_DIR"]) / name
    var_dir.mkdir()
    for secret, size in (("secret_key", 50), ("metrics_token", 32)):
        (var_dir / secret).write_text(secrets.token_urlsafe(size) + "\n")
        (var_dir / secret).chmod(0o600)
    env = {**b.embedded_env, "RELAY_VAR_DIR": str(var_dir)}
    done = manage("migrate", "--noinput", "--verbosity", "0", env=env)
    if done.returncode != 0:
        raise RuntimeError(f"migrate on the embedded default failed: {done.stderr[-2000:]}")
    return env


def _register(base: str) -> str:
    """A new user's JWT, through the API as a client would get one."""
    body = {"email": "bench-embedded_me@relay.example", "password": fixtures.PASSWORD}
    status, answer = http("POST", base + "/api/auth/register", body)
    if status != 201:
        raise RuntimeError(f"register on the embedded default answered {status}: {answer}")
    return answer["token"]


# --- the ws_* scenarios: WebSocket clients in separate processes ----------------------------------
def _relay_urls(b: Bench, count: int) -> list[str]:
    """One user per socket up to len(b.ws); past that (ws_idle only) users hold several sockets."""
    return [f"{b.relay.ws.ws_base}/ws?token={b.ws[i % len(b.ws)][0]}" for i in range(count)]


def _bare_urls(b: Bench, count: int) -> list[str]:
    return [f"{b.bare.ws_base}/ws"] * count


def _idle_capacity(b: Bench, server: procs.Server | procs.Listener, urls: list[str]) -> list[dict]:
    p = b.profile
    rss0 = server.rss()
    groups, steps, opened = [], [], 0
    try:
        for step in p.ws_idle_steps:
            part = urls[opened:step]
            processes = math.ceil(len(part) / p.ws_idle_connections_per_process)
            group = ClientGroup(part, processes, {"mode": "idle"}, deadline=900)
            groups.append(group)
            started = time.monotonic()
            connected = group.ready(timeout=300)
            steps.append({"step": step, "added": step - opened, "connected": connected,
                          "connect_s": time.monotonic() - started})  # fmt: skip
            opened = step
            time.sleep(min(1.0, p.idle_seconds))  # let the accept bursts settle
            total = sum(s["connected"] for s in steps)
            with CpuMeter(server) as cpu:
                time.sleep(p.idle_seconds)
            rss = server.rss()
            steps[-1].update(total=total, rss=rss, cpu=cpu.value,
                             per_conn_kib=(rss - rss0) / max(total, 1) / 1024)  # fmt: skip
    finally:
        for group in groups:
            group.close()
    return steps


def ws_idle(b: Bench) -> None:
    top = b.profile.ws_idle_steps[-1]
    bare = _idle_capacity(b, b.bare, _bare_urls(b, top))
    relay = _idle_capacity(b, b.relay.ws, _relay_urls(b, top))
    for r, base in zip(relay, bare, strict=True):
        last = r["step"] == top
        kib_met = r["per_conn_kib"] <= 40 and r["total"] >= r["step"] if last else None
        cpu_met = r["cpu"] <= 2 * base["cpu"] if last else None
        b.add(Row("ws_idle", f"idle sockets open of {r['step']:,} attempted", r["total"], "sockets",
                  base["total"], "bare Daphne", f">= {top:,}" if last else "",
                  (r["total"] >= top) if last else None,
                  note=f"{r['added']:,} more opened in {r['connect_s']:.1f} s"))  # fmt: skip
        b.add(Row("ws_idle", f"RSS per idle socket at {r['step']:,}", r["per_conn_kib"], "KiB",
                  base["per_conn_kib"], "bare Daphne", f"<= 40 KiB at {top:,}" if last else "",
                  kib_met, note=f"process RSS {r['rss'] / 2**20:,.0f} MiB"))  # fmt: skip
        b.add(Row("ws_idle", f"idle CPU at {r['step']:,} sockets", r["cpu"] * 100, "%",
                  base["cpu"] * 100, "bare Daphne", "<= 2x bare Daphne" if last else "",
                  cpu_met, r["cpu"]))  # fmt: skip


def _pings(b: Bench, server: procs.Server | procs.Listener, urls: list[str], figures: dict) -> None:
    p = b.profile
    with ClientGroup(urls, p.client_processes, {"mode": "ping"}, deadline=600) as group:
        connected = group.ready(timeout=180)
        if connected < len(urls):
            raise RuntimeError(f"only {connected} of {len(urls)} sockets opened for ws_ping")
        if len(urls) == p.ws_ping_connections[0]:
            with CpuMeter(server) as cpu:
                sat = group.run({"window": 1, "seconds": p.ws_seconds}, timeout=60)
            figures[(len(urls), "sat")] = {
                "rate": sat.total("in_window") / p.ws_seconds,
                "cpu": cpu.value, "client_cpu": sat.client_cpu,
            }  # fmt: skip
        for rate in p.ws_ping_rates:
            with CpuMeter(server) as cpu:
                run = group.run({"rate": rate, "seconds": p.ws_seconds, "window": 0}, timeout=60)
            lat = run.merged("latencies")
            figures[(len(urls), rate)] = {
                "p50": percentile(lat, 50), "p99": percentile(lat, 99),
                "lost": run.total("lost"), "sent": run.total("sent"),
                "cpu": cpu.value, "client_cpu": run.client_cpu,
            }  # fmt: skip


def ws_ping(b: Bench) -> None:
    p = b.profile
    bare: dict = {}
    for conns in p.ws_ping_connections:
        _pings(b, b.bare, _bare_urls(b, conns), bare)
        _pings(b, b.relay.ws, _relay_urls(b, conns), b.ws_ping_relay)
    first = p.ws_ping_connections[0]
    r, base = b.ws_ping_relay[(first, "sat")], bare[(first, "sat")]
    b.add(Row("ws_ping", f"ping round trips/s at saturation, {first} sockets (closed loop)",
              r["rate"], "msg/s", base["rate"], "bare Daphne", server_cpu=r["cpu"],
              client_cpu=r["client_cpu"]))  # fmt: skip
    for conns in p.ws_ping_connections:
        for rate in p.ws_ping_rates:
            r, base = b.ws_ping_relay[(conns, rate)], bare[(conns, rate)]
            note = f"{r['lost']:,} of {r['sent']:,} unanswered" if r["lost"] else ""
            where = f"{rate:,} msg/s over {conns:,} sockets"
            b.add(Row("ws_ping", f"ping RTT p50, {where}", r["p50"], "ms", base["p50"],
                      "bare Daphne", server_cpu=r["cpu"], client_cpu=r["client_cpu"],
                      note=note))  # fmt: skip
            target = rate == 1000 or (rate == p.ws_ping_rates[len(p.ws_ping_rates) // 2])
            b.add(Row("ws_ping", f"ping RTT p99, {where}", r["p99"], "ms", base["p99"],
                      "bare Daphne", "<= 10 ms" if target else "",
                      (r["p99"] <= 10) if target else None, r["cpu"],
                      r["client_cpu"]))  # fmt: skip


def _ws_ping_reference(b: Bench) -> dict:
    """ws_ping on Relay at 1,000 msg/s (the target's reference) over the fewest sockets."""
    p = b.profile
    rate = 1000 if 1000 in p.ws_ping_rates else p.ws_ping_rates[len(p.ws_ping_rates) // 2]
    return {"rate": rate, **b.ws_ping_relay.get((p.ws_ping_connections[0], rate), {})}


# What bench_env sets out of Relay's way that ws_call_acks_embedded takes too: its 100 calls a
# socket would meet the per-user rate limit and the free plan's quotas (3 calls up at once, and no
# worker runs to end them), which would measure refusals instead of acks.
LIMITS_RAISED = ("RATE_LIMIT_CALLS_PER_USER", "PLAN_FREE_CALLS_PER_DAY",
                 "PLAN_FREE_CALL_SECONDS_PER_DAY", "PLAN_FREE_CONCURRENT_CALLS")  # fmt: skip
EMBEDDED = "embedded default (SQLite, embedded Redis)"


@dataclass
class CallTarget:
    """The Relay ws_call_acks sends its calls to: one user per socket, where its calls are stored,
    its /metrics, and the sustained rate it is to reach."""

    scenario: str
    relay: procs.Relay
    accounts: list  # (JWT, user id) of distinct users
    metrics_token: str
    persisted: Callable[[str], set[str]]  # the stored callIds that start with a prefix
    acks_target: int  # sustained acks/s
    where: str = ""  # which database, in the figures of the sustained and burst rows

    def urls(self, count: int) -> list[str]:
        return [f"{self.relay.ws.ws_base}/ws?token={token}" for token, _ in self.accounts[:count]]


class BatchMeter:
    """The submit batches Relay wrote across a `with` block, from the _sum and _count of
    `relay_call_submit_batch_size` on its /metrics (every Daphne process's, summed)."""

    def __init__(self, target: CallTarget):
        self.target = target
        self.batches, self.mean = 0, math.nan

    def totals(self) -> tuple[float, float]:
        request = urllib.request.Request(  # noqa: S310 - the bench's own server
            self.target.relay.http.base + "/metrics",
            headers={"Authorization": f"Bearer {self.target.metrics_token}"},
        )
        with urllib.request.urlopen(request, timeout=15) as response:  # noqa: S310
            text = response.read().decode()
        found = {"_sum": 0.0, "_count": 0.0}
        for family in text_string_to_metric_families(text):
            if family.name == "relay_call_submit_batch_size":
                for sample in family.samples:
                    suffix = sample.name.removeprefix(family.name)
                    if suffix in found:
                        found[suffix] += sample.value
        return found["_sum"], found["_count"]

    def __enter__(self):
        self._sum, self._count = self.totals()
        return self

    def __exit__(self, *exc):
        total, count = self.totals()
        self.batches = round(count - self._count)
        self.mean = (total - self._sum) / self.batches if self.batches else math.nan

    def note(self) -> str:
        return f"mean batch {self.mean:.1f} calls ({self.batches:,} batches)"


def ws_call_acks(b: Bench) -> None:
    fixtures.calls_reset()
    target = CallTarget(
        "ws_call_acks",
        b.relay,
        b.ws,
        b.env["METRICS_TOKEN"],
        fixtures.calls_persisted,
        acks_target=1000,
    )
    _ws_call_acks(b, target)


def ws_call_acks_embedded(b: Bench) -> None:
    """ws_call_acks on the embedded default: runrelay as `make run` starts it (embedded_me's var
    directory, with `make run`'s metrics token file too), its users made in its SQLite database."""
    p = b.profile
    env = {**_embedded_var_dir(b, "ws_call_acks-embedded"), **{k: b.env[k] for k in LIMITS_RAISED}}
    accounts = fixtures.elsewhere(
        env, "ws_accounts", max(p.ws_call_acks_connections, p.ws_call_acks_burst_sockets)
    )
    relay = procs.Relay(env, log_name="runrelay-ws_call_acks-embedded")
    try:
        token = (Path(env["RELAY_VAR_DIR"]) / "metrics_token").read_text().strip()
        target = CallTarget("ws_call_acks_embedded", relay, accounts, token,
                            lambda prefix: set(fixtures.elsewhere(env, "calls_persisted", prefix)),
                            acks_target=300, where=f", {EMBEDDED}")  # fmt: skip
        _ws_call_acks(b, target)
    finally:
        relay.stop()


def _ws_call_acks(b: Bench, t: CallTarget) -> None:
    p = b.profile
    stamp = f"{t.scenario.lower()}-{int(time.time())}"
    ref = _ws_ping_reference(b)
    urls = t.urls(p.ws_call_acks_connections)
    acked: list[str] = []
    with ClientGroup(urls, p.client_processes, {"mode": "call"}, deadline=600) as group:
        group.ready(timeout=120)
        with CpuMeter(t.relay.ws) as cpu, BatchMeter(t) as batches:
            sat = group.run({"window": p.ws_call_acks_window, "seconds": p.ws_seconds,
                             "prefix": f"{stamp}-sat"}, timeout=90)  # fmt: skip
        acked += sat.merged("acked")
        acks_per_s = sat.total("in_window") / p.ws_seconds
        sat_ref = b.ws_ping_relay.get((p.ws_ping_connections[0], "sat"), {}).get("rate")
        errors = [f"{n} {c}" for c, n in sat.errors().items()]
        b.add(Row(t.scenario, f"sustained acks/s{t.where}, {len(urls)} sockets x "
                  f"{p.ws_call_acks_window} in flight", acks_per_s, "acks/s", sat_ref,
                  "ws_ping round trips/s at saturation", f">= {t.acks_target:,}",
                  acks_per_s >= t.acks_target, cpu.value, sat.client_cpu,
                  ", ".join([batches.note(), *errors])))  # fmt: skip
        rate = max(1.0, acks_per_s / 2)
        with CpuMeter(t.relay.ws) as cpu, BatchMeter(t) as batches:
            run = group.run({"rate": rate, "seconds": p.ws_seconds, "window": 0,
                             "prefix": f"{stamp}-rate"}, timeout=90)  # fmt: skip
        acked += run.merged("acked")
    lat = run.merged("latencies")
    note = f"at {rate:,.0f} calls/s (half the sustained rate)"
    b.add(Row(t.scenario, "call submit to call_ack p50", percentile(lat, 50), "ms",
              ref.get("p50"), f"ws_ping p50, {ref['rate']:,} msg/s", server_cpu=cpu.value,
              client_cpu=run.client_cpu, note=f"{note}; {batches.note()}"))  # fmt: skip
    limit = ref.get("p99", math.nan) + 5
    # Without ws_ping in the run (--only ws_call_acks) there is no reference, so no verdict either.
    met = None if math.isnan(limit) else percentile(lat, 99) <= limit
    b.add(Row(t.scenario, "call submit to call_ack p99", percentile(lat, 99), "ms",
              ref.get("p99"), f"ws_ping p99, {ref['rate']:,} msg/s",
              f"<= ws_ping p99 + 5 ms ({limit:.1f} ms)", met, cpu.value, run.client_cpu,
              note))  # fmt: skip
    persisted = t.persisted(stamp)
    lost = len(set(acked) - persisted)
    b.add(Row(t.scenario, "acked calls missing from the database", lost, "lost", target="0",
              met=lost == 0,
              note=f"{len(acked):,} acked, {len(persisted):,} persisted; "
              f"{sat.total('lost') + run.total('lost'):,} submitted calls got no ack"))  # fmt: skip
    _ws_call_acks_burst(b, t, f"{stamp}-burst")


BURST_DRAIN = 60.0


def _ws_call_acks_burst(b: Bench, t: CallTarget, prefix: str) -> None:
    """Every socket sends its calls back to back, all at once: how long until all are acked."""
    p = b.profile
    urls = t.urls(p.ws_call_acks_burst_sockets)
    with ClientGroup(urls, p.client_processes, {"mode": "call"}, deadline=600) as group:
        group.ready(timeout=120)
        with CpuMeter(t.relay.ws) as cpu, BatchMeter(t) as batches:
            # The whole burst is sent at once: give its acks a minute, not the usual 30 s.
            run = group.run({"burst": p.ws_call_acks_burst_calls, "window": 0, "seconds": 0,
                             "drain": BURST_DRAIN, "prefix": prefix},
                            timeout=BURST_DRAIN + 60)  # fmt: skip
    total = p.ws_call_acks_burst_sockets * p.ws_call_acks_burst_calls
    acked, lat = run.merged("acked"), run.merged("latencies")
    firsts = [r["first_sent"] for r in run.results if r.get("first_sent")]
    lasts = [r["last_ack"] for r in run.results if r.get("last_ack")]
    span = max(lasts) - min(firsts) if firsts and lasts else math.nan
    what = (f"burst of {total:,} calls{t.where}, {p.ws_call_acks_burst_sockets} sockets x "
            f"{p.ws_call_acks_burst_calls} back to back (one user per socket)")  # fmt: skip
    errors = [f"{n} {c}" for c, n in run.errors().items()]
    note = ", ".join([f"{len(acked):,} acked, {run.total('lost'):,} got no ack", *errors,
                      batches.note()])  # fmt: skip
    b.add(Row(t.scenario, f"{what}: first send to last call_ack", span, "s", target="<= 3 s",
              met=span <= 3 and len(acked) == total, server_cpu=cpu.value,
              client_cpu=run.client_cpu, note=note))  # fmt: skip
    for label, q in (("p50", 50), ("p99", 99)):
        b.add(Row(t.scenario, f"burst: call submit to call_ack {label}", percentile(lat, q),
                  "ms", server_cpu=cpu.value, client_cpu=run.client_cpu))  # fmt: skip
    lost = len(set(acked) - t.persisted(prefix))
    b.add(Row(t.scenario, "burst: acked calls missing from the database", lost, "lost",
              target="0", met=lost == 0))  # fmt: skip


def ws_status_push(b: Bench) -> None:
    p = b.profile
    fixtures.calls_reset()
    worker = procs.Worker(b.env)
    accounts = b.ws[: p.ws_status_push_connections]
    urls = [f"{b.relay.ws.ws_base}/ws?token={token}" for token, _ in accounts]
    try:
        with ClientGroup(urls, 1, {"mode": "status"}, deadline=300) as group:
            group.ready(timeout=60)
            with CpuMeter(b.relay.ws) as cpu:
                run = group.run(
                    {
                        "rate": p.ws_status_push_rate,
                        "seconds": p.ws_status_push_seconds,
                        "settle": p.ws_status_push_settle,
                        "prefix": f"ws_status_push-{int(time.time())}",
                    },
                    timeout=60,
                )
    finally:
        worker.stop()
    with ClientGroup(urls, 1, {"mode": "probe"}, deadline=300) as group:
        group.ready(timeout=60)
        group.start({})
        time.sleep(0.3)  # the probe readers are running before the first frame
        fixtures.probe_sender(
            [uid for _, uid in accounts],
            rate=max(20.0, p.ws_status_push_rate * 4),
            seconds=p.ws_status_push_seconds,
        )
        time.sleep(0.5)
        group.send("END")
        probe = group.collect(timeout=30)
    base = probe.merged("latencies")
    by_status: dict[str, list[float]] = {}
    for r in run.results:
        for status, values in r.get("by_status", {}).items():
            by_status.setdefault(status, []).extend(values)
    # `queued` is committed and pushed by Daphne itself (the submit); every later state by
    # the worker, through Redis to Daphne: two different paths, reported apart.
    paths = {
        "from the worker": [x for st, v in by_status.items() if st != "queued" for x in v],
        "queued, from Daphne": by_status.get("queued", []),
    }
    label = "channel-layer push from another process"
    for path, lat in paths.items():
        note = f"{len(lat):,} frames"
        if path == "from the worker":
            note += ": " + ", ".join(
                f"{len(v)} {st}" for st, v in sorted(by_status.items()) if st != "queued"
            )
        b.add(
            Row(
                "ws_status_push",
                f"call_status {path}, commit to client: p50",
                percentile(lat, 50),
                "ms",
                percentile(base, 50),
                label,
                server_cpu=cpu.value,
                client_cpu=run.client_cpu,
                note=note,
            )
        )
        b.add(
            Row(
                "ws_status_push",
                f"call_status {path}, commit to client: p99",
                percentile(lat, 99),
                "ms",
                percentile(base, 99),
                label,
                server_cpu=cpu.value,
                client_cpu=run.client_cpu,
            )
        )


# --- sip_50_calls: real calls over SIP, SIPp as the far end ---------------------------------------
WARM_UP_PER_AGENT = 2


@dataclass
class LoadRun:
    """sip_50_calls's calls all at once, as the harness saw them."""

    prefix: str
    acks: dict  # callId -> wall-clock time its call_ack arrived
    samples: list  # sip.Sample every 0.2 s until the calls ended
    idle_rss: int
    own_cpu: float  # the agents' CPU seconds during the run
    tts_cpu: float  # of the espeak-ng and sox runs they started
    wall: float
    client_cpu: float  # SIPp's and the WebSocket client's, per wall second


def sip_50_calls(b: Bench) -> None:
    p = b.profile
    # ws_call_acks and ws_status_push leave queued calls behind: the agents would dial them
    fixtures.calls_reset()
    sip.check_no_worker()
    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_50_calls"
    prefix = f"sip_50_calls-{int(time.time())}"
    trunk = sip.free_udp_port()
    total = WARM_UP_PER_AGENT * p.sip_50_agents + p.sip_50_calls + 2 * p.sip_50_latency_calls
    far_end = sip.Sipp(workdir / "sipp", "uas", port=trunk, calls=total, echo=True, timeout=300)
    agents = None
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{trunk}", count=p.sip_50_agents,
                            capacity=p.sip_50_agent_calls)  # fmt: skip
        # One client process: each RUN sends exactly the calls it is given.
        urls = _relay_urls(b, min(10, len(b.ws)))
        with ClientGroup(urls, 1, {"mode": "submit"}, deadline=900) as group:
            group.ready(timeout=60)
            _sip_50_warm_up(b, group, agents, f"{prefix}-warm-")
            load = _sip_50_load(b, group, agents, far_end, f"{prefix}-load-")
            acks = _sip_50_repeats(b, group, prefix)
            sip.watch(prefix, total, agents, deadline=120)
        sipp_status = sip.sipp_exit(far_end, deadline=60)
        audio = agents.ended_calls()
    finally:
        if agents is not None:
            agents.stop()
        far_end.stop()
    calls = sip.placed(prefix)
    invites = sip.invites(far_end.messages)
    peak = _sip_50_concurrency_rows(b, load, calls, invites, audio, sipp_status)
    _sip_50_cost_rows(b, load, peak)
    _sip_50_latency_rows(b, load, acks, calls, invites)
    _sip_50_render_rows(b)


def _sip_50_warm_up(b: Bench, group: ClientGroup, agents, prefix: str) -> None:
    """A few short calls, not measured, so that no figure pays an agent's first call (lazy
    imports, its first database connection and threads, espeak-ng from a cold disk cache)."""
    count = WARM_UP_PER_AGENT * b.profile.sip_50_agents
    calls = [{"callId": f"{prefix}{i}", "message": sip.message(f"warm up {i}", 0)}
             for i in range(count)]  # fmt: skip
    group.run({"calls": calls}, timeout=60)
    sip.watch(prefix, count, agents, deadline=60)


def _sip_50_load(b: Bench, group: ClientGroup, agents, far_end, prefix: str) -> LoadRun:
    """Every call at once, each with a message of its own; sampled until all have ended."""
    p = b.profile
    calls = [{"callId": f"{prefix}{i}", "message": sip.message(f"load {i}", p.sip_50_sentences)}
             for i in range(p.sip_50_calls)]  # fmt: skip
    idle_rss = agents.rss()
    sipp = far_end.proc.pid
    (own0, tts0), sipp0, started = agents.cpu(), sip.cpu_seconds(sipp), time.monotonic()
    run = group.run({"calls": calls}, timeout=60)
    samples = sip.watch(prefix, p.sip_50_calls, agents, deadline=120)
    (own1, tts1), sipp1, wall = agents.cpu(), sip.cpu_seconds(sipp), time.monotonic() - started
    client_cpu = (sipp1 - sipp0 + run.client_cpu * run.wall) / wall
    return LoadRun(prefix, dict(run.merged("acked_at")), samples, idle_rss, own1 - own0,
                   tts1 - tts0, wall, client_cpu)  # fmt: skip


def _sip_50_repeats(b: Bench, group: ClientGroup, prefix: str) -> dict[str, dict]:
    """Round `miss`: texts no call has used; round `hit`: the same texts again. A few calls at
    a time, the next batch once these were dialed, so the agents claim each at once."""
    p = b.profile
    texts = [sip.message(f"repeat {i}", p.sip_50_sentences) for i in range(p.sip_50_latency_calls)]
    acks: dict[str, dict] = {}
    for kind in ("miss", "hit"):
        calls = [{"callId": f"{prefix}-{kind}-{i}", "message": t} for i, t in enumerate(texts)]
        acks[kind] = {}
        for first in range(0, len(calls), p.sip_50_latency_batch):
            batch = calls[first : first + p.sip_50_latency_batch]
            acks[kind].update(group.run({"calls": batch}, timeout=60).merged("acked_at"))
            sip.wait_dialed([c["callId"] for c in batch], deadline=60)
    return acks


def _ack_to_invite_ms(acks: dict, calls: dict, invites: dict) -> list[float]:
    """Per acked call: SIPp's receipt of its first INVITE minus the client's receipt of its
    call_ack, matched by the Call-ID the agent recorded when it claimed the call."""
    out = []
    for call_id, acked_at in acks.items():
        call = calls.get(call_id)
        invite = invites.get(call.provider_call_id) if call else None
        if invite is not None:
            out.append((invite.at - acked_at) * 1000)
    return out


def _sip_50_concurrency_rows(b: Bench, load: LoadRun, calls: dict, invites: dict, audio: dict,
                         sipp_status: int | None) -> int:  # fmt: skip
    """The peak of calls in progress together, and the calls lost; returns the peak."""
    p = b.profile
    n = p.sip_50_calls
    mine = [c for call_id, c in calls.items() if call_id.startswith(load.prefix)]
    completed = [c for c in mine if c.status == "completed"]
    dialed = {c.provider_call_id for c in mine} & invites.keys()
    lost = n - sum(1 for c in completed if c.provider_call_id in invites)
    unknown = len(invites.keys() - {c.provider_call_id for c in calls.values()})
    per_agent = Counter(invites[call_id].sender for call_id in dialed)
    split = "/".join(str(count) for _, count in sorted(per_agent.items()))
    heard = [audio[c.pk]["speech"] for c in mine if c.pk in audio]
    peak = sip.peak_in_progress(mine)
    polled = max((s.in_progress for s in load.samples), default=0)
    b.add(
        Row(
            "sip_50_calls",
            f"answered calls in progress at once, {n} submitted at once",
            peak,
            "calls",
            target=f">= {n}",
            met=peak >= n,
            server_cpu=(load.own_cpu + load.tts_cpu) / load.wall,
            client_cpu=load.client_cpu,
            note=f"{p.sip_50_agents} agents x {p.sip_50_agent_calls}, placed {split}; polled every "
            f"0.2 s: {polled}",
        )
    )
    b.add(
        Row(
            "sip_50_calls",
            "calls lost: not completed, or no INVITE at SIPp",
            lost,
            "lost",
            target="0",
            met=lost == 0 and not unknown,
            note=f"{len(completed)} of {n} completed; SIPp saw {len(dialed)} of their "
            f"Call-IDs, {len(invites)} distinct INVITE Call-IDs in all sip_50_calls and {unknown} "
            f"unknown to the database; SIPp exit {sipp_status}; {sum(x > 0 for x in heard)} "
            f"calls heard echoed speech, median "
            f"{statistics.median(heard) if heard else math.nan:.1f} s",
        )
    )
    return peak


def _sip_50_cost_rows(b: Bench, load: LoadRun, peak: int) -> None:
    p = b.profile
    cpu = load.own_cpu + load.tts_cpu
    b.add(Row("sip_50_calls", "agents' CPU per call", cpu / p.sip_50_calls * 1000, "CPU ms",
              server_cpu=cpu / load.wall,
              note=f"{load.tts_cpu / p.sip_50_calls * 1000:.0f} ms of it espeak-ng and sox; "
              f"{cpu:.1f} s over {load.wall:.0f} s"))  # fmt: skip
    up_cpu, up, span = sip.cpu_while_up(load.samples)
    b.add(
        Row(
            "sip_50_calls",
            f"agents' CPU while {up} calls are up (100% = one core)",
            up_cpu * 100,
            "%",
            server_cpu=up_cpu,
            note=f"over {span:.1f} s",
        )
    )
    peak_rss = max((s.rss for s in load.samples), default=load.idle_rss)
    per_call = (peak_rss - load.idle_rss) / max(peak, 1) / 1024
    b.add(Row("sip_50_calls", "agents' RSS per concurrent call (peak - idle)", per_call, "KiB",
              note=f"idle {load.idle_rss / 2**20:.0f} MiB, peak {peak_rss / 2**20:.0f} MiB, "
              f"{p.sip_50_agents} agents"))  # fmt: skip


def _sip_50_latency_rows(b: Bench, load: LoadRun, acks: dict, calls: dict, invites: dict) -> None:
    p = b.profile
    lat = _ack_to_invite_ms(load.acks, calls, invites)
    b.add(Row("sip_50_calls", f"call_ack to INVITE, {p.sip_50_calls} at once (TTS misses): p95",
              percentile(lat, 95), "ms",
              note=f"p50 {percentile(lat, 50):.0f} ms, max {percentile(lat, 100):.0f} ms; "
              f"{len(lat)} calls"))  # fmt: skip
    lat = {kind: _ack_to_invite_ms(acks[kind], calls, invites) for kind in ("miss", "hit")}
    how = f"{p.sip_50_latency_batch} at a time"
    for label, stat in (("p50", 50), ("p95", 95), ("max", 100)):
        miss, hit = percentile(lat["miss"], stat), percentile(lat["hit"], stat)
        b.add(Row("sip_50_calls", f"call_ack to INVITE, TTS cache miss: {label}", miss, "ms",
                  note=f"{len(lat['miss'])} calls, {how}" if stat == 50 else ""))  # fmt: skip
        target = stat == 95
        b.add(Row("sip_50_calls", f"call_ack to INVITE, TTS cache hit: {label}", hit, "ms", miss,
                  "cache miss", "<= 100 ms" if target else "", (hit <= 100) if target else None,
                  note=f"{len(lat['hit'])} calls, {how}" if stat == 50 else ""))  # fmt: skip


def _sip_50_render_rows(b: Bench) -> None:
    p = b.profile
    texts = [sip.message(f"render {i}", p.sip_50_sentences) for i in range(p.sip_50_render_texts)]
    r = sip.render_ms(texts)
    miss = statistics.median(r["miss"])
    hits, misses = r["counters"]
    spoken = statistics.median(r["audio_s"])
    b.add(Row("sip_50_calls", "Speech.render in-process, new text (miss): median", miss, "ms",
              note=f"{len(texts)} texts speaking {spoken:.1f} s each"))  # fmt: skip
    b.add(Row("sip_50_calls", "Speech.render, same text again (memory hit): median",
              statistics.median(r["memory"]), "ms", miss, "miss",
              note=f"Speech counters: {hits} hits, {misses} misses"))  # fmt: skip
    b.add(
        Row(
            "sip_50_calls",
            "Speech.render, same text, new Speech on that cache (file hit): median",
            statistics.median(r["file"]),
            "ms",
            miss,
            "miss",
        )
    )


# --- issue 26: TLS + SRTP against plain UDP, and 200 calls on one agent ------------------------
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


def _sip_leg(b: Bench, workdir: Path, prefix: str, *, secure: bool, calls: int, sentences: int,
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
        urls = _relay_urls(b, min(10, len(b.ws)))
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
    invites = sip.invites(far_end.sipp.messages)
    leg.resent = sip.invites_received(far_end.sipp.messages) - len(invites)
    done = [c for c in placed if c.status == "completed"]
    leg.completed = len(done)
    leg.lost = calls - sum(1 for c in done if c.provider_call_id in invites)
    b.keep_logs = b.keep_logs or leg.lost > 0  # what went wrong is in the agents' and SIPp's logs
    leg.heard = sum(1 for c in placed if audio.get(c.pk, {}).get("speech", 0) > 0)
    leg.peak = sip.peak_in_progress(placed)
    leg.polled = max((s.in_progress for s in leg.samples), default=0)
    answers = [c.answered_at for c in placed if c.answered_at is not None]
    leg.last_answer = max(answers) - submitted if answers else math.nan
    if metered:
        message_s = sip.message_seconds(Path(agents.env["TTS_CACHE_DIR"]), text)
        leg.steady = sip.steady(placed, sip.dialogs(far_end.sipp.messages), far_end.streams(),
                                message_s)  # fmt: skip
    return leg


def _legs_note(legs: list[Leg]) -> str:
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
    fixtures.calls_reset()
    sip.check_no_worker()
    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_tls_srtp_cpu"
    stamp = int(time.time())
    legs: dict[bool, list[Leg]] = {False: [], True: []}
    for r in range(p.sip_cost_rounds):
        for secure in (False, True) if r % 2 == 0 else (True, False):
            name = f"{'tls' if secure else 'udp'}-{r}"
            legs[secure].append(_sip_leg(b, workdir / name, f"cost-{stamp}-{name}-",
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
              note=f"{rounds}; {_legs_note(legs[False])}"))  # fmt: skip
    ratio_ok = tls[0] <= 1.5 * udp[0]
    b.add(Row("sip_tls_srtp_cpu", "agent CPU per answered call, TLS + SRTP through Kamailio",
              tls[0], "CPU ms", udp[0], "plain UDP, same calls", "<= 1.5x plain UDP",
              ratio_ok and tls[3] == 0, tls[1], tls[2],
              note=f"{rounds}; {_legs_note(legs[True])}"))  # fmt: skip
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
    fixtures.calls_reset()
    sip.check_no_worker()
    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_200_calls"
    stamp = int(time.time())
    n = p.sip_many_calls
    alone = _sip_leg(b, workdir / "udp-alone", f"many-{stamp}-alone-", secure=False,
                     calls=p.sip_many_alone, sentences=p.sip_many_sentences, deadline=120,
                     metered=True)  # fmt: skip
    for secure in (False, True) if p.sip_many_tls else (False,):
        name = "tls" if secure else "udp"
        leg = _sip_leg(b, workdir / name, f"many-{stamp}-{name}-", secure=secure, calls=n,
                       sentences=p.sip_many_sentences, deadline=240,
                       metered=not secure)  # fmt: skip
        what = f"{n} calls at once on one agent, {leg.what}"
        load = (leg.sipp_cpu + leg.client_cpu) / leg.wall
        b.add(Row("sip_200_calls", f"{what}: calls completed", leg.completed, "calls",
                  target=f"{n}", met=leg.completed == n and leg.lost == 0,
                  server_cpu=leg.agent_cpu / leg.wall, client_cpu=load,
                  note=f"{leg.lost} lost; {_legs_note([leg])}"))  # fmt: skip
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


# --- issue 28: forwarded calls, bridged by the agent ------------------------------------------
def sip_forward_cpu(b: Bench) -> None:
    """The agent's CPU per bridged (forwarded) call against its CPU per played-message
    outbound call (sip_tls_srtp_cpu's plain UDP leg): the same number of calls at once and the
    same talk, for the bridged callers say the very message the outbound calls play, and
    hang up when it ends; legs alternated (outbound, bridged, bridged, outbound, ...)."""
    p = b.profile
    fixtures.calls_reset()
    sip.check_no_worker()
    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_forward_cpu"
    stamp = int(time.time())
    n = p.forward_cost_calls
    number = fixtures.forwarding_number()
    pcap, talk = forward.message_pcap(workdir, sip.message("cost", p.forward_cost_sentences))
    outbound: list[Leg] = []
    bridged: list[forward.Bridges] = []
    for r in range(p.forward_cost_rounds):
        for kind in ("outbound", "bridged") if r % 2 == 0 else ("bridged", "outbound"):
            name = f"{kind}-{r}"
            if kind == "outbound":
                outbound.append(_sip_leg(b, workdir / name, f"fwdcost-{stamp}-{name}-",
                                         secure=False, calls=n,
                                         sentences=p.forward_cost_sentences,
                                         deadline=120))  # fmt: skip
            else:
                bridged.append(forward.bridges(b, workdir / name, number, calls=n,
                                               talk_ms=round(talk * 1000), capacity=2 * n,
                                               target_codec=forward.PCMU, echo=True,
                                               caller_play=forward.play(pcap),
                                               deadline=120))  # fmt: skip
    calls = sum(leg.calls for leg in outbound)
    cpu, wall = sum(leg.agent_cpu for leg in outbound), sum(leg.wall for leg in outbound)
    load = sum(leg.sipp_cpu + leg.client_cpu for leg in outbound) / wall
    base = cpu / calls * 1000
    legs = f"{n} calls at once, {len(outbound)} leg{'s' if len(outbound) != 1 else ''} each"
    b.add(Row("sip_forward_cpu", "agent CPU per played-message outbound call, plain UDP (the "
              "baseline)", base, "CPU ms", server_cpu=cpu / wall, client_cpu=load,
              note=f"{legs}; the {talk:.1f} s message played to SIPp, which echoes it; "
              f"{_legs_note(outbound)}"))  # fmt: skip
    calls = sum(run.calls for run in bridged)
    cpu, wall = sum(run.agent_cpu for run in bridged), sum(run.wall for run in bridged)
    per_call = cpu / calls * 1000
    lost = sum(run.lost for run in bridged)
    b.add(Row("sip_forward_cpu", "agent CPU per bridged (forwarded) call", per_call, "CPU ms",
              base, "played-message call, same calls and talk", "<= 2x the played-message call",
              per_call <= 2 * base and lost == 0, cpu / wall,
              sum(run.load_cpu for run in bridged) / wall,
              note=f"{legs}; each caller (SIPp, PCMA) says the same message in 20 ms packets "
              "and hangs up when it ends, the target (SIPp, PCMU, so transcoded both ways) "
              f"echoes what it hears; {forward.runs_note(bridged)}"))  # fmt: skip
    lost_out = sum(leg.lost for leg in outbound)
    b.keep_logs = b.keep_logs or lost > 0  # the agents' and SIPps' logs say what went wrong
    b.add(Row("sip_forward_cpu", "calls lost: not completed, or not bridged and recorded",
              lost + lost_out, "lost", target="0", met=lost + lost_out == 0,
              note=f"{lost_out} played-message, {lost} bridged"))  # fmt: skip


FORWARD_CAPACITY = 250  # SIP_MAX_CONCURRENT_CALLS of sip_forward_100's agent: a bridge takes 2


def sip_forward_100(b: Bench) -> None:
    """One agent given every forwarded call at once (SIPp places them within a second, to a
    number forwarding to one target, SIPp again), all bridged and up together; bench/
    rtpmeter.py is both ends' media and times each packet's pass through the agent."""
    p = b.profile
    fixtures.calls_reset()
    sip.check_no_worker()
    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_forward_100"
    n = p.forward_many_bridges
    talk = p.forward_many_talk_seconds
    number = fixtures.forwarding_number()
    floor = forward.meter_floor(workdir / "floor", legs=n, seconds=p.forward_floor_seconds)
    run = forward.bridges(b, workdir / "bridges", number, calls=n, talk_ms=round(talk * 1000),
                          capacity=max(FORWARD_CAPACITY, 2 * n), target_codec=forward.PCMA,
                          echo=False, meter_seconds=talk - 1.5, deadline=180)  # fmt: skip
    b.keep_logs = b.keep_logs or run.lost > 0
    what = f"{n} forwarded calls at once on one agent"
    b.add(Row("sip_forward_100", f"{what}: calls bridged and completed", run.bridged, "calls",
              target=f"{n}", met=run.bridged == n and run.lost == 0,
              server_cpu=run.agent_cpu / run.wall, client_cpu=run.load_cpu / run.wall,
              note=f"{run.lost} lost; {forward.runs_note([run])}"))  # fmt: skip
    b.add(Row("sip_forward_100", f"{what}: bridges up at once", run.peak, "bridges",
              target=f">= {n}", met=run.peak >= n,
              note=f"polled every 0.2 s: {run.polled}; the last bridged "
              f"{run.last_bridge:.1f} s after the callers started, each held "
              f"{talk:.0f} s"))  # fmt: skip
    _forward_delay_rows(b, run, floor, n)
    up_cpu, up, span = sip.cpu_while_up(run.samples)
    b.add(Row("sip_forward_100", f"{what}: agent CPU while {up} bridges are up (100% = one "
              "core)", up_cpu * 100, "%", server_cpu=up_cpu,
              note=f"over {span:.1f} s; {run.agent_cpu / n * 1000:.0f} CPU ms per bridged call "
              f"over the whole run ({run.agent_cpu:.1f} s in {run.wall:.0f} s)"))  # fmt: skip
    peak_rss = max((s.rss for s in run.samples), default=run.idle_rss)
    b.add(Row("sip_forward_100", f"{what}: agent RSS per bridged call (peak - idle)",
              (peak_rss - run.idle_rss) / max(run.peak, 1) / 1024, "KiB",
              note=f"idle {run.idle_rss / 2**20:.0f} MiB, peak {peak_rss / 2**20:.0f} MiB; "
              "two legs, two RTP streams a call"))  # fmt: skip


def _forward_delay_rows(b: Bench, run: forward.Bridges, floor: dict, n: int) -> None:
    meter = run.meter or {}
    delays = [d for _, _, d in run.packets]
    first, last = run.all_up
    phases = {
        "until the last bridge": [d for _, at, d in run.packets if at < first],
        f"while all {n} were up ({max(0.0, last - first):.1f} s)": [
            d for _, at, d in run.packets if first <= at <= last
        ],
        "from the first hang-up": [d for _, at, d in run.packets if at > last],
    }
    ways = {way: [d for w, _, d in run.packets if w == i]
            for i, way in enumerate(("to the targets", "to the callers"))}  # fmt: skip
    seconds: dict[int, list[float]] = {}
    for _, at, d in run.packets:
        seconds.setdefault(int(at - run.started_at), []).append(d)
    worst = max(seconds.items(), key=lambda item: percentile(item[1], 99), default=None)
    sent, received = meter.get("sent", [0, 0]), meter.get("received", [0, 0])
    alone = floor["delay_ms"]["all"]
    what = "RTP forwarding delay through the agent, one pass"
    b.add(Row("sip_forward_100", f"{what}: p50", percentile(delays, 50), "ms",
              client_cpu=meter.get("cpu_s", math.nan) / max(meter.get("wall_s", 1), 1e-6),
              note=f"{len(delays):,} packets timed, {n} bridges; "
              + ", ".join(f"{way}: p50 {percentile(v, 50):.2f} ms, p99 {percentile(v, 99):.2f} ms"
                          for way, v in ways.items())
              + f"; the meter alone, socket to socket with as many flows: p50 "
              f"{alone['p50'] * 1000:.1f} µs, p99 {alone['p99'] * 1000:.1f} µs"))  # fmt: skip
    p99 = percentile(delays, 99)
    note = f"p99.9 {percentile(delays, 99.9):.2f} ms, max {percentile(delays, 100):.1f} ms; p99 "
    note += ", ".join(f"{phase} {percentile(v, 99):.2f} ms ({len(v):,} packets)"
                      for phase, v in phases.items() if v)  # fmt: skip
    if worst is not None:
        second, values = worst
        note += (f"; worst second: p99 {percentile(values, 99):.2f} ms, in second "
                 f"{second + 1} after the callers' start ({len(values):,} packets)")  # fmt: skip
    b.add(Row("sip_forward_100", f"{what}: p99", p99, "ms", target="<= 10 ms",
              met=p99 <= 10 and bool(delays), note=note))  # fmt: skip
    lost = sum(sent) - sum(received)
    b.add(Row("sip_forward_100", f"{what}: packets not relayed", lost, "packets",
              note=f"{sent[0]:,} sent to the agent from the callers' side, {received[0]:,} "
              f"relayed to the targets; {sent[1]:,} from the targets' side, {received[1]:,} "
              f"relayed to the callers; {meter.get('crossed', 0)} arrived on another bridge; "
              f"{meter.get('paired', 0)} of {meter.get('legs', 0)} bridges relayed the "
              "callers' first packets"))  # fmt: skip


SCENARIOS = [("http_bare_asgi", http_bare_asgi), ("http_me", http_me),
             ("http_history", http_history), ("http_logins", http_logins),
             ("embedded_me", embedded_me), ("ws_idle", ws_idle), ("ws_ping", ws_ping),
             ("ws_call_acks", ws_call_acks), ("ws_call_acks_embedded", ws_call_acks_embedded),
             ("ws_status_push", ws_status_push), ("sip_50_calls", sip_50_calls),
             ("sip_tls_srtp_cpu", sip_tls_srtp_cpu), ("sip_200_calls", sip_200_calls),
             ("sip_forward_cpu", sip_forward_cpu),
             ("sip_forward_100", sip_forward_100)]  # fmt: skip
