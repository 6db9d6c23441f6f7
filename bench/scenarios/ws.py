"""The WebSocket scenarios: ws_idle, ws_ping, ws_call_acks (also on the embedded default as
ws_call_acks_embedded) and ws_status_push. Their clients run in processes of their own
(bench/wsload.py), as many as the profile asks for."""

from __future__ import annotations

import math
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench import fixtures, procs
from bench.report import Row
from bench.scenarios.common import Bench, CpuMeter, embedded_var_dir, relay_urls
from bench.stats import percentile
from bench.wsload import ClientGroup


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
    relay = _idle_capacity(b, b.relay.ws, relay_urls(b, top))
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
        _pings(b, b.relay.ws, relay_urls(b, conns), b.ws_ping_relay)
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
    env = {**embedded_var_dir(b, "ws_call_acks-embedded"), **{k: b.env[k] for k in LIMITS_RAISED}}
    accounts = fixtures.elsewhere(
        env, "ws_accounts", max(p.ws_call_acks_connections, p.ws_call_acks_burst_sockets)
    )
    relay = procs.Relay(env, log_name="runrelay-ws_call_acks-embedded")
    try:
        token = (Path(env["RELAY_VAR_DIR"]) / "metrics_token").read_text().strip()
        target = CallTarget("ws_call_acks_embedded", relay, accounts, token,
                            lambda prefix: set(fixtures.elsewhere(env, "calls_persisted", prefix)),
                            acks_target=600, where=f", {EMBEDDED}")  # fmt: skip
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
        for q in (50, 99):  # the frame counts in the p50's note only
            b.add(
                Row(
                    "ws_status_push",
                    f"call_status {path}, commit to client: p{q}",
                    percentile(lat, q),
                    "ms",
                    percentile(base, q),
                    label,
                    server_cpu=cpu.value,
                    client_cpu=run.client_cpu,
                    note=note if q == 50 else "",
                )
            )
