"""The HTTP scenarios measured with wrk: http_bare_asgi (a framework-free app, for context),
http_me, http_history and embedded_me (the embedded default as `make run` starts it), and the
plain Django view that is their baseline. http_logins has a module of its own: most of its figures
come from bench/burst.py's bursts, not from wrk, and it is as long as the rest together."""

from __future__ import annotations

import contextlib
import math

from bench import fixtures, procs, wrk
from bench.report import Row
from bench.scenarios.common import Bench, CpuMeter, embedded_var_dir
from bench.stats import percentile
from harness.live import http


def _paced_connections(rate: float) -> int:
    # About 200 ms between a connection's requests, so a response's own latency (which wrk's
    # delay() adds to the gap) costs little of the intended rate.
    return max(2, math.ceil(rate / 5))


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
                  cpu.value, sat.client_cpu, http_errors(sat)))  # fmt: skip
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
            note=http_errors(plain),
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
    note = http_errors(run, f"{run.rps:,.0f} req/s achieved of {half:,.0f}")
    b.add(Row("http_me", f"GET /api/user/me ({label}): p50 at half load", run.p50_ms, "ms",
              base.p50_ms, "plain Django view, same rate", server_cpu=cpu.value,
              client_cpu=run.client_cpu, note=note))  # fmt: skip
    b.add(Row("http_me", f"GET /api/user/me ({label}): p99 at half load", run.p99_ms, "ms",
              base.p99_ms, "plain Django view, same rate", "<= 10 ms", run.p99_ms <= 10,
              cpu.value, run.client_cpu))  # fmt: skip


def http_errors(result: wrk.WrkResult, note: str = "") -> str:
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
            note = http_errors(run, f"{run.requests:,} requests")
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
    plain_alone_row(b, "http_history")


def plain_alone(b: Bench) -> wrk.WrkResult:
    """The plain Django view on one connection, closed loop: measured once, for http_history and
    http_logins."""
    if b.plain_alone is None:
        b.plain_alone = wrk.run(b.plain.base + "/plain", seconds=b.profile.http_seconds,
                                connections=1, threads=1)  # fmt: skip
    return b.plain_alone


def plain_alone_row(b: Bench, scenario: str) -> None:
    plain = plain_alone(b)
    b.add(Row(scenario, "plain Django view, gunicorn, one connection: p50", plain.p50_ms, "ms",
              note=f"p99 {plain.p99_ms:.2f} ms: the framework's floor under the same "
              "server"))  # fmt: skip


def embedded_me(b: Bench) -> None:
    """runrelay with no DATABASE_URL or REDIS_URL (SQLite under its own RELAY_VAR_DIR, the
    embedded Redis), a user registered over the API, /me at saturation; the plain Django
    view under a gunicorn with the same environment beside it."""
    p = b.profile
    env = embedded_var_dir(b, "embedded_me")
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
              http_errors(run)))  # fmt: skip


def _register(base: str) -> str:
    """A new user's JWT, through the API as a client would get one."""
    body = {"email": "bench-embedded_me@relay.example", "password": fixtures.PASSWORD}
    status, answer = http("POST", base + "/api/auth/register", body)
    if status != 201:
        raise RuntimeError(f"register on the embedded default answered {status}: {answer}")
    return answer["token"]
