"""What every family of scenarios shares: the Bench that carries the servers and collects the
rows, the CPU meter, and the two helpers that more than one family needs (the bench users'
WebSocket URLs, the embedded default's own var directory). They live here rather than in one
family's module so that no family imports another's."""

from __future__ import annotations

import json
import math
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench import fixtures, procs, sip, wrk
from bench.profiles import Profile
from bench.report import Row
from harness.live import manage


@dataclass
class Bench:
    """What run.py started and prepared for the scenarios, and the rows they report; a scenario
    also leaves here the figures a later one compares against (http_bare_asgi's req/s,
    ws_ping's round trips)."""

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


def relay_urls(b: Bench, count: int) -> list[str]:
    """One user per socket up to len(b.ws); past that (ws_idle only) users hold several sockets."""
    return [f"{b.relay.ws.ws_base}/ws?token={b.ws[i % len(b.ws)][0]}" for i in range(count)]


def embedded_var_dir(b: Bench, name: str) -> dict:
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


def alternated(rounds: int, first, second):
    """(round, kind) for `rounds` rounds of the two kinds a scenario compares, first one then
    the other in turn (first, second, second, first, first, ...), so that neither always runs
    on the warmer agent."""
    for r in range(rounds):
        for kind in (first, second) if r % 2 == 0 else (second, first):
            yield r, kind


def sip_start(b: Bench, name: str) -> Path:
    """A SIP scenario's clean slate: no queued call left, no task worker to race the agents
    for the calls, and the directory of scenario `name` under the bench's var dir."""
    fixtures.calls_reset()
    sip.check_no_worker()
    return Path(b.env["RELAY_VAR_DIR"]) / name


class VoiceApp:
    """A voice application on loopback in the harness's process (sip_scripted_100,
    sip_speech_gather): answers every hook at once with `answer` (a script, as JSON), and
    keeps, per request, when it arrived (time.time()), its body, and how long the answer took
    it (request read to response written, ms)."""

    def __init__(self, answer: list, path: str = "/hook") -> None:
        body = json.dumps(answer).encode()
        requests = self.requests = []  # (arrived, body as JSON, ms)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                arrived, started = time.time(), time.perf_counter()
                got = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                requests.append((arrived, json.loads(got), (time.perf_counter() - started) * 1000))

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def times(self) -> list[float]:
        """How long each answer took, ms."""
        return [ms for _, _, ms in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
