"""`make bench` / `make bench-smoke`: every scenario of issue 6, sip_50_calls (SIP), issues 26's
and 28's SIP scenarios and issue 44's transcript cost, in one run.

Usage: BENCH_DATABASE_URL=postgres://... BENCH_REDIS_URL=redis://.../5 \
       .venv/bin/python bench/run.py [--smoke] [--write-docs] \
           [--only http_bare_asgi,ws_ping,sip_200_calls]

Starts its own servers (Relay as `manage.py runrelay --no-worker` runs it: gunicorn for HTTP, Daphne
for the WebSocket; Daphne and uvicorn with a bare ASGI app; the worker for ws_status_push, SIPp and
the telephony agents for sip_50_calls and the sip_* scenarios, Kamailio for TLS) on free ports,
measures, stops them, and prints the report.
--write-docs rewrites docs/benchmarks.md (keeping its "History query plans" section), or with
--only replaces only the rows of the scenarios run (and the method notes); without it the
report goes to var/bench-<profile>.md. Exits non-zero only when a scenario
failed to run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import fixtures, procs, report  # noqa: E402
from bench.method_notes import METHOD_NOTES  # noqa: E402
from bench.profiles import FULL, SMOKE  # noqa: E402
from harness.live import child_environ  # noqa: E402


def bench_env(var_dir: Path) -> dict:
    """Production-like: DEBUG off, PostgreSQL, Redis, no access log, rate limits out of the
    way (the scenarios measure the service, not its limiter's refusals). Database connections
    are Relay's default (persistent, DATABASE_CONN_MAX_AGE) unless BENCH_DATABASE_POOL_SIZE
    asks for a psycopg pool of that size per process, and statements are prepared as Relay's
    default has it unless BENCH_DATABASE_PREPARED_STATEMENTS says otherwise (true, false or
    psycopg)."""
    env = child_environ(
        DATABASE_URL=os.environ["BENCH_DATABASE_URL"],
        REDIS_URL=os.environ["BENCH_REDIS_URL"],
        SECRET_KEY="bench-only-secret-key-" + "x" * 40,
        DEBUG="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        LOG_LEVEL="WARNING",  # Relay's access line is INFO
        RELAY_VAR_DIR=str(var_dir),
        RATE_LIMIT_AUTH_PER_IP="1000000/m",
        RATE_LIMIT_AUTH_PER_EMAIL="1000000/m",
        RATE_LIMIT_CALLS_PER_USER="1000000/m",
        # Quotas no scenario reaches, still counted on every submit as by default.
        PLAN_FREE_CALLS_PER_DAY="1000000000",
        PLAN_FREE_CALL_SECONDS_PER_DAY="1000000000",
        PLAN_FREE_CONCURRENT_CALLS="1000000000",
        # /metrics for the bench's own reads (ws_call_acks's batch sizes); operators set theirs.
        METRICS_TOKEN="bench-only-metrics-token-" + "x" * 16,
        SIMULATED_STEP_SECONDS="0.05",
        SIMULATED_TALK_SCALE="0",
        WORKER_POLL_INTERVAL="0.2",
        # sip_scripted_100's voice application is the harness, on loopback.
        WEBHOOK_ALLOW_PRIVATE="true",
        PYTHONUNBUFFERED="1",
    )
    for name in ("DATABASE_POOL_SIZE", "DATABASE_PREPARED_STATEMENTS"):
        env.pop(name, None)
        if os.environ.get(f"BENCH_{name}"):
            env[name] = os.environ[f"BENCH_{name}"]
    return env


def embedded_env() -> dict:
    """embedded_me's environment, as `make run` leaves it (RELAY_VAR_DIR is embedded_me's to set):
    no DATABASE_URL, REDIS_URL or SECRET_KEY, so Relay uses SQLite, starts its embedded Redis and
    reads the secret file under RELAY_VAR_DIR. Read before setup() adds the bench's settings to this
    process's environment."""
    env = child_environ()
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DATABASE_POOL_SIZE"):
        env.pop(name, None)
    return env


SETTINGS_NOTE = (
    "Settings: DEBUG=false, PostgreSQL with {connections}, Redis channel layer and cache, "
    "LOG_LEVEL=WARNING (no access log), rate limits raised to 1,000,000/m. Relay runs as "
    "production starts it, `manage.py runrelay --no-worker`: gunicorn serves HTTP with "
    "{http_workers} threaded workers (`HTTP_WORKERS` x `HTTP_THREADS`, "
    "relay/gunicorn_conf.py), the WebSocket is "
    "served on a port of its own by {ws_processes} (`WS_PROCESSES`, `relay.platform.daphne_server "
    "-v 0` with runrelay's frame limits); `PASSWORD_HASH_CONCURRENCY={hashing}`, host-wide. "
    "The task worker runs only during ws_status_push (in production workers are separate "
    "processes, here they would only steal one of the 2 cores), the telephony agents only "
    "during sip_50_calls and the sip_* scenarios."
)


def settings_note(env: dict) -> str:
    from django.conf import settings  # this process runs the servers' settings (setup())

    pool = env.get("DATABASE_POOL_SIZE")
    connections = (
        f"a psycopg pool of at most {pool} connections per process (`DATABASE_POOL_SIZE`)"
        if pool
        else "persistent connections (`DATABASE_CONN_MAX_AGE="
        f"{settings.DATABASES['default']['CONN_MAX_AGE']}`, Relay's default)"
    )
    prepared = env.get("DATABASE_PREPARED_STATEMENTS")
    if prepared:
        connections += f", `DATABASE_PREPARED_STATEMENTS={prepared}`"
    return SETTINGS_NOTE.format(
        connections=connections,
        http_workers=f"{settings.HTTP_WORKERS} x {settings.HTTP_THREADS}",
        ws_processes=f"{settings.WS_PROCESSES} Daphne process"
        + ("es" if settings.WS_PROCESSES != 1 else ""),
        hashing=settings.PASSWORD_HASH_CONCURRENCY,
    )


# Issues before 30 (and the rows they quote) name the scenarios by short ids.
OLD_NAMES = (
    "Scenario names before issue 30: H1 `http_bare_asgi`, H2 `http_me`, H3 `http_history`, "
    "H4 `http_logins`, E1 `embedded_me`, W1 `ws_idle`, W2 `ws_ping`, W3 `ws_call_acks`, "
    "W3_embedded `ws_call_acks_embedded`, W4 `ws_status_push`, S1 `sip_50_calls` (issue 29's "
    "S1 targets, 200 calls on one agent, are `sip_200_calls`' rows)."
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="every scenario at tiny scale")
    parser.add_argument("--write-docs", action="store_true", help="rewrite docs/benchmarks.md")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep the servers' logs (agents, SIPp, Kamailio) even when "
                        "every scenario ran")  # fmt: skip
    parser.add_argument("--only", default="", help="comma-separated scenarios, any case, "
                        "e.g. http_bare_asgi,ws_ping,sip_200_calls")  # fmt: skip
    args = parser.parse_args()
    profile = SMOKE if args.smoke else FULL
    only = {s.strip().lower() for s in args.only.split(",") if s.strip()}
    started = time.monotonic()

    var_dir = Path(tempfile.mkdtemp(prefix=f"relay-bench-{profile.name}-"))
    env = bench_env(var_dir)
    embedded = embedded_env()
    open_files = procs.raise_open_files_limit()
    fixtures.ensure_database(env["DATABASE_URL"])
    fixtures.setup(env)
    fixtures.flush_redis(env["REDIS_URL"])

    from bench import scenarios  # after setup(): it imports Django models lazily

    # Only http_history reads the history records: a run --only other scenarios loads none.
    records = profile.history_records if not only or "http_history" in only else 0
    print(f"[bench] {profile.name}: preparing users and {records:,} history records",
          flush=True)  # fmt: skip
    http_user = fixtures.user(fixtures.HTTP_EMAIL, password=fixtures.PASSWORD)
    history_account = fixtures.history_user(records)
    ws_needed = max(
        *profile.ws_ping_connections,
        profile.ws_call_acks_connections,
        profile.ws_call_acks_burst_sockets,
        profile.ws_status_push_connections,
    )
    bench = None
    failures: list[str] = []
    with contextlib.ExitStack() as servers:
        bare, plain, relay = procs.start_together(
            servers,
            lambda: procs.daphne("daphne-bare", "bench.bare_app:app", env),
            lambda: procs.gunicorn_plain("gunicorn-plain", env),
            lambda: procs.Relay(env),
        )
        bench = scenarios.Bench(
            profile=profile, env=env, embedded_env=embedded, bare=bare, plain=plain,
            relay=relay,
            http_token=fixtures.token_for(http_user), api_key=http_user.api_key,
            history_account=history_account,
            history_token=fixtures.token_for(history_account),
            ws=fixtures.ws_accounts(ws_needed),
        )  # fmt: skip
        for name, scenario in scenarios.SCENARIOS:
            if only and name.lower() not in only:
                continue
            t = time.monotonic()
            print(f"[bench] {name} ...", flush=True)
            try:
                scenario(bench)
            except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the rest
                traceback.print_exc()
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
            print(f"[bench] {name} done in {time.monotonic() - t:.0f} s", flush=True)

    if failures or args.keep_logs or (bench is not None and bench.keep_logs):
        print(f"[bench] server logs kept in {var_dir}", flush=True)
    else:
        shutil.rmtree(var_dir, ignore_errors=True)  # only server logs; nothing failed
    elapsed = time.monotonic() - started
    header = (
        f"# Benchmarks\n\n"
        f"Produced by `make bench` (`bench/run.py`, profile `{profile.name}`) on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {elapsed:.0f} s.\n\n"
        f"Machine: {procs.machine()}; open-file limit {open_files:,}. Shared and noisy: every "
        f"figure sits next to a baseline measured in the same run.\n\n"
        f"{settings_note(env)}\n\n"
        "Targets are goals: a figure that misses one is reported as it is.\n\n"
        f"{OLD_NAMES}\n\n"
        "## Results"
    )
    if failures:
        header += "\n\nScenarios that failed to run: " + "; ".join(failures)
    text = report.render(bench.rows if bench else [], header=header, notes=METHOD_NOTES)
    print(text)
    if args.write_docs and only:
        names = [name for name, _ in scenarios.SCENARIOS if name.lower() in only]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        stamp = (f"`bench/run.py --only {','.join(names)}` (profile `{profile.name}`) on {when} "
                 f"in {elapsed:.0f} s")  # fmt: skip
        if failures:
            stamp += "; failed to run: " + "; ".join(failures)
        report.merge_docs(bench.rows if bench else [], scenarios=names, stamp=stamp,
                          notes=METHOD_NOTES)  # fmt: skip
        print(f"[bench] merged the rows of {', '.join(names)} into {report.DOC}")
    elif args.write_docs:
        report.write_docs(text)
        print(f"[bench] wrote {report.DOC}")
    else:
        out = ROOT / "var" / f"bench-{profile.name}.md"
        out.parent.mkdir(exist_ok=True)
        out.write_text(text)
        print(f"[bench] wrote {out}")
    print(f"[bench] finished in {elapsed:.0f} s; {len(failures)} scenario(s) failed to run")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
