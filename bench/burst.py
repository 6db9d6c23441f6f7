"""Requests sent all at the same moment, one per connection, and a paced probe timed per
request beside them: what wrk cannot do (wrk loops its connections, and times no request by
its status or its moment).

The harness runs this module as a process of its own (`python -m bench.burst`, the plan as
JSON on stdin, the answers as JSON on stdout), so the load generator's CPU is its own, as
wrk's is. The burst's connections are opened first (the kernel completes them in the
listen backlog whether or not a worker has accepted them), then every request is written in
one pass of the event loop: all within a millisecond or so. Each answer is timed from its
own write to the end of its response (gunicorn's sync workers close every connection after
one response). The probe is open loop: a request on a new connection at each tick of a
fixed rate, timed from its tick, so a stalled server shows in its latency rather than in
fewer requests.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30.0  # seconds an answer may take before it counts as none (status 0)


@dataclass(frozen=True)
class Answer:
    sent: float  # seconds since the plan's start (its tick, for a probe)
    ms: float  # from `sent` to the end of the response
    status: int  # 0: no response (refused connection, reset, timeout)
    code: str = ""  # the `code` of Relay's error body, if any
    retry_after: str = ""


@dataclass(frozen=True)
class BurstRun:
    burst: list[Answer]  # in the order the requests were written
    probes: list[Answer]  # in the order of their ticks
    burst_at: float  # seconds since the plan's start: the first write of the burst
    burst_end: float  # the last burst answer's end
    client_cpu: float  # this client's CPU seconds per wall second


def _raw(method: str, path: str, port: int, headers: dict, body: str | None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    data = (body or "").encode()
    if body is not None:
        lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _parse(response: bytes) -> tuple[int, str, str]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    retry_after = next(
        (ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("retry-after:")),
        "",
    )
    code = ""
    if status >= 400:
        try:
            code = str(json.loads(body).get("code", ""))
        except (ValueError, AttributeError):
            code = ""
    return status, code, retry_after


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sent: float,
                  started: float) -> Answer:  # fmt: skip
    try:
        response = await asyncio.wait_for(reader.read(), TIMEOUT)
        ended = time.monotonic()
        status, code, retry_after = _parse(response)
    except (TimeoutError, OSError, ValueError, IndexError):
        ended, status, code, retry_after = time.monotonic(), 0, "", ""
    finally:
        writer.close()
    return Answer(sent - started, (ended - sent) * 1000, status, code, retry_after)


async def _one(port: int, raw: bytes, tick: float, started: float) -> Answer:
    """A probe: connect, write, read; timed from its tick."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port),
                                                TIMEOUT)  # fmt: skip
        writer.write(raw)
    except (TimeoutError, OSError):
        return Answer(tick - started, (time.monotonic() - tick) * 1000, 0)
    return await _answer(reader, writer, tick, started)


async def _burst(port: int, requests: list[bytes], started: float) -> tuple[list[Answer], float]:
    """Every request on its own connection, all connections opened first, then every request
    written in one pass; the answers and the moment of the first write."""
    streams = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in requests))
    sent = []
    for (_, writer), raw in zip(streams, requests, strict=True):
        sent.append(time.monotonic())
        writer.write(raw)  # small enough to leave at once: the socket buffer is empty
    answers = await asyncio.gather(
        *(_answer(reader, writer, at, started)
          for (reader, writer), at in zip(streams, sent, strict=True))
    )  # fmt: skip
    return list(answers), sent[0] if sent else time.monotonic()


async def _run(plan: dict) -> dict:
    port = plan["port"]
    requests = [_raw(r["method"], r["path"], port, r.get("headers", {}), r.get("body"))
                for r in plan.get("burst", [])]  # fmt: skip
    probe = plan.get("probe")
    started = time.monotonic()
    probes: list[asyncio.Task] = []
    burst: list[Answer] = []
    burst_at = burst_end = 0.0

    async def probing(until: asyncio.Future) -> None:
        raw = _raw("GET", probe["path"], port, probe.get("headers", {}), None)
        tick = 0
        while True:
            at = started + tick / probe["rate"]
            if until.done() and at > until.result():
                return
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            probes.append(asyncio.create_task(_one(port, raw, at, started)))
            tick += 1

    stop: asyncio.Future = asyncio.get_running_loop().create_future()
    prober = asyncio.create_task(probing(stop)) if probe else None
    if requests:
        await asyncio.sleep(plan.get("lead", 0.0))
        burst, first = await _burst(port, requests, started)
        burst_at = first - started
        burst_end = max((a.sent + a.ms / 1000 for a in burst), default=burst_at)
        stop.set_result(time.monotonic() + plan.get("tail", 0.0))
    else:
        stop.set_result(started + plan.get("seconds", 0.0))
    if prober is not None:
        await prober
    done = await asyncio.gather(*probes)
    return {
        "burst": [asdict(a) for a in burst],
        "probes": [asdict(a) for a in done],
        "burst_at": burst_at,
        "burst_end": burst_end,
    }


def run(plan: dict) -> BurstRun:
    """Run `plan` in a process of its own and return what it measured.

    plan: {"port": the server's, "burst": [{"method", "path", "headers"?, "body"?}, ...],
    "lead": seconds the probe runs alone before the burst, "tail": after the burst's last
    answer, "probe": {"path", "headers"?, "rate"} or absent, "seconds": the probe's length
    when there is no burst}.
    """
    from bench.procs import children_cpu_seconds  # not in the client: it imports psutil

    cpu_before, wall = children_cpu_seconds(), time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own module
        [sys.executable, "-m", "bench.burst"],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=TIMEOUT * 2 + plan.get("seconds", 0) + plan.get("lead", 0) + 60,
    )
    wall = time.monotonic() - wall
    if done.returncode != 0:
        raise RuntimeError(f"bench.burst failed ({done.returncode}): {done.stderr[-2000:]}")
    data = json.loads(done.stdout)
    return BurstRun(
        burst=[Answer(**a) for a in data["burst"]],
        probes=[Answer(**a) for a in data["probes"]],
        burst_at=data["burst_at"],
        burst_end=data["burst_end"],
        client_cpu=(children_cpu_seconds() - cpu_before) / wall,
    )


def main() -> None:
    # One file descriptor per connection: run.py has raised the limit this process inherits.
    print(json.dumps(asyncio.run(_run(json.load(sys.stdin)))))


if __name__ == "__main__":
    main()
