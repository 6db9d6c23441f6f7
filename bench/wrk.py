"""HTTP load from wrk: saturation (closed loop) and a fixed rate (paced with Lua `delay()`).

wrk's Lua `done()` prints one JSON line with the figures we need, so nothing scrapes wrk's
human-readable output. Latencies are wrk's (microseconds, converted to ms).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.procs import children_cpu_seconds

DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"errors":%d,"non2xx":%d,' ..
    '"p50_us":%d,"p99_us":%d,"mean_us":%f,"max_us":%d,"statuses":%s}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
    statuses_json and statuses_json() or "{}"))
end
"""

# Responses counted by status code: each thread has its own Lua state, so its own `statuses`
# table, read back through thread:get() at the end. Only when asked: a Lua call per response
# costs wrk time it should spend on the load.
STATUSES = r"""
statuses = {}
local threads = {}
setup = function(thread) table.insert(threads, thread) end
response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
statuses_json = function()
  local counts = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses") or {}) do
      counts[status] = (counts[status] or 0) + n
    end
  end
  local parts = {}
  for status, n in pairs(counts) do
    table.insert(parts, string.format('"%d":%d', status, n))
  end
  return "{" .. table.concat(parts, ",") .. "}"
end
"""


@dataclass(frozen=True)
class WrkResult:
    rps: float
    requests: int
    errors: int
    non2xx: int
    p50_ms: float
    p99_ms: float
    client_cpu: float  # wrk's CPU seconds per wall second (1.0 = one core busy)
    statuses: dict = field(default_factory=dict)  # status code -> responses, when counted


def ensure_wrk() -> str:
    """wrk's path; installs Debian's package when missing (the harness runs as root)."""
    path = shutil.which("wrk")
    if path:
        return path
    install = ["apt-get", "install", "-y", "-q", "wrk"]
    if subprocess.run(install, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=True)
        subprocess.run(install, capture_output=True, check=True)
    path = shutil.which("wrk")
    if not path:
        raise RuntimeError("wrk is not installed and apt-get could not install it")
    return path


def _lua_string(value: str) -> str:
    return json.dumps(value)  # a JSON string of ASCII text is a valid Lua string literal


def _script(
    method: str, headers: dict, body: str | None, delay_ms: int | None, statuses: bool
) -> str:
    lines = [f"wrk.method = {_lua_string(method)}"]
    for name, value in headers.items():
        lines.append(f"wrk.headers[{_lua_string(name)}] = {_lua_string(value)}")
    if body is not None:
        lines.append(f"wrk.body = {_lua_string(body)}")
    if delay_ms is not None:
        lines.append(f"delay = function() return {delay_ms} end")
    if statuses:
        lines.append(STATUSES)
    return "\n".join(lines) + "\n" + DONE


def run(
    url: str,
    *,
    seconds: float,
    connections: int,
    threads: int = 2,
    method: str = "GET",
    headers: dict | None = None,
    body: str | None = None,
    rate: float | None = None,
    statuses: bool = False,
) -> WrkResult:
    """One wrk run. With `rate`, each connection waits connections/rate between requests;
    with `statuses`, the result counts responses by status code.

    That paces the load near `rate` without waiting for a saturated server's queue to grow,
    but it is not a perfect open loop: a slow response delays its connection's next request
    (wrk's delay() cannot correct for coordinated omission). The achieved rate is reported.
    """
    delay_ms = None
    if rate is not None:
        delay_ms = max(1, round(1000 * connections / rate))
    threads = max(1, min(threads, connections))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(_script(method, headers or {}, body, delay_ms, statuses))
        script = f.name
    duration = max(1, round(seconds))
    argv = [
        ensure_wrk(), "-t", str(threads), "-c", str(connections), "-d", f"{duration}s",
        "--timeout", "5s", "-s", script, url,
    ]  # fmt: skip
    cpu_before = children_cpu_seconds()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30)
    finally:
        Path(script).unlink(missing_ok=True)
    cpu = children_cpu_seconds() - cpu_before
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[:500]}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    wall = data["duration_us"] / 1e6
    return WrkResult(
        rps=data["requests"] / wall,
        requests=data["requests"],
        errors=data["errors"],
        non2xx=data["non2xx"],
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        client_cpu=cpu / wall,
        statuses={int(code): n for code, n in data["statuses"].items()},
    )
