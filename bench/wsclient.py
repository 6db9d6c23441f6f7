"""One WebSocket load-generator process: `python -m bench.wsclient <config.json>`.

It opens its sockets and prints `READY {...}`; then, for every `RUN {overrides}` line on
stdin, it runs its mode with the config updated by the overrides and prints `RESULT {...}`;
`STOP` (or end of input) closes the sockets and ends it. Modes:
- idle: hold the sockets until `STOP` (ws_idle).
- ping: send `ping` frames at a fixed total rate, open loop, round-robin over the sockets;
  latency runs from each frame's scheduled send time to its pong, so a slow server cannot
  slow the load down and hide its own queueing (ws_ping). With `window`, closed loop instead:
  each socket keeps that many pings in flight (round trips/s at saturation).
- call: submit `call` frames at a fixed rate (open loop), or keep `window` calls in flight per
  socket (closed loop, for sustained acks/s), or send `burst` calls on every socket back to
  back, all sockets at once; latency to the `call_ack` (ws_call_acks). The wall-clock times of the
  first send and of the last ack let the harness time a burst across processes.
- status: submit calls at a fixed rate and time every `call_status` from its `ts` (ws_status_push).
- probe: time `bench_probe` frames pushed through the channel layer by the harness, until
  an `END` line (ws_status_push's baseline).
- submit: send the `calls` given in the run (callId and message each) at once, round-robin
  over the sockets, and note the wall-clock time each `call_ack` arrives (sip_50_calls sets that
  against SIPp's log of the INVITE, so it must be the clock both processes share).
Every mode is bounded by `deadline` seconds, whatever the server does.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import deque

from websockets.asyncio.client import connect

CONNECT_CONCURRENCY = 25  # per process: Twisted's listen backlog is only 50
CONNECT_TRIES = 3
# How long to wait for late replies after the load stops (a run's `drain` overrides it).
# Calls get long: a run must not leave a backlog of unacked calls that the next run would
# then be timed behind.
DRAIN_SECONDS = {"ping": 3.0, "call": 30.0, "submit": 30.0}


class Client:
    def __init__(self, config: dict):
        self.config = config
        self.sockets: list = []
        self.failed = 0
        self.reset({})

    def reset(self, overrides: dict) -> None:
        self.config = {**self.config, **overrides}
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self.other_frames = 0
        self.lost = 0
        self.acked: list[str] = []
        self.sent = 0
        self.refill_until = 0.0
        # Replies that arrived while the load ran (throughput must not count the drain).
        self.window_end = time.perf_counter() + float(self.config.get("seconds", 0))
        self.in_window = 0
        self.by_status: dict[str, list[float]] = {}
        self.acked_at: list[tuple[str, float]] = []
        self.first_sent: float | None = None  # wall clock, a burst's first send
        self.last_ack: float | None = None  # wall clock

    async def open_all(self) -> None:
        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

        async def one(url: str):
            async with gate:
                for attempt in range(CONNECT_TRIES):
                    try:
                        # No client pings: idle means idle, Daphne's own keep-alive still runs.
                        return await connect(
                            url, ping_interval=None, open_timeout=20, max_queue=None
                        )
                    except Exception:  # noqa: BLE001 - refused, reset, timed out: all mean retry
                        await asyncio.sleep(0.2 * (attempt + 1))
                return None

        results = await asyncio.gather(*(one(u) for u in self.config["urls"]))
        self.sockets = [ws for ws in results if ws is not None]
        self.failed = len(results) - len(self.sockets)

    async def close_all(self) -> None:
        await asyncio.gather(
            *(asyncio.wait_for(ws.close(), 5) for ws in self.sockets), return_exceptions=True
        )

    # --- modes --------------------------------------------------------------------------------
    async def ping(self) -> None:
        pending = [deque() for _ in self.sockets]
        readers = [
            asyncio.create_task(self._read_pongs(ws, q))
            for ws, q in zip(self.sockets, pending, strict=True)
        ]

        def send_ping(_i, ws, queue):
            queue.append(time.perf_counter())
            return ws.send('{"type":"ping"}')

        if self.config.get("window"):
            await self._closed_loop_pings(pending)
        else:
            await self._schedule(send_ping, pending)
        await self._drain(lambda: sum(len(q) for q in pending))
        self.lost = sum(len(q) for q in pending)
        for task in readers:
            task.cancel()

    async def _closed_loop_pings(self, pending: list[deque]) -> None:
        # Fill each socket's window; every pong then sends the next ping (see _read_pongs).
        self.refill_until = time.monotonic() + self.config["seconds"]
        for ws, queue in zip(self.sockets, pending, strict=True):
            for _ in range(self.config["window"]):
                queue.append(time.perf_counter())
                self.sent += 1
                await ws.send('{"type":"ping"}')
        await asyncio.sleep(self.config["seconds"])

    async def _read_pongs(self, ws, queue: deque) -> None:
        async for raw in ws:
            now = time.perf_counter()
            if json.loads(raw).get("type") == "pong" and queue:
                self.latencies.append((now - queue.popleft()) * 1000)
                self.in_window += now <= self.window_end
                if time.monotonic() < self.refill_until:
                    queue.append(time.perf_counter())
                    self.sent += 1
                    await ws.send('{"type":"ping"}')
            else:
                self.other_frames += 1

    async def call(self) -> None:
        started: dict[str, float] = {}
        window = self.config.get("window")
        slots = [asyncio.Semaphore(window) for _ in self.sockets] if window else None
        readers = [
            asyncio.create_task(self._read_acks(ws, started, slots[n] if slots else None))
            for n, ws in enumerate(self.sockets)
        ]
        if window:
            await self._closed_loop(started, slots)
        elif self.config.get("burst"):
            await self._burst(started)
        else:
            await self._schedule(lambda i, ws, _q: self._send_call(ws, started, i), None)
        await self._drain(lambda: len(started))
        self.lost = len(started)
        for task in readers:
            task.cancel()

    def _send_call(self, ws, started: dict, i: int):
        call_id = f"{self.config['prefix']}-{i}"
        started[call_id] = time.perf_counter()
        self.sent += 1
        # The last digit 0 makes the simulated provider complete the call.
        frame = {"type": "call", "callId": call_id, "to": "+442079460120", "message": "Bench"}
        return ws.send(json.dumps(frame))

    async def _closed_loop(self, started: dict, slots: list) -> None:
        end = time.monotonic() + self.config["seconds"]
        counter = iter(range(10**9))

        async def feed(ws, slot):
            while time.monotonic() < end:
                await slot.acquire()
                if time.monotonic() >= end:
                    return
                await self._send_call(ws, started, next(counter))

        await asyncio.gather(*(feed(ws, s) for ws, s in zip(self.sockets, slots, strict=True)))

    async def _burst(self, started: dict) -> None:
        count = self.config["burst"]

        async def feed(n: int, ws):
            for k in range(count):
                await self._send_call(ws, started, n * count + k)

        self.first_sent = time.time()
        await asyncio.gather(*(feed(n, ws) for n, ws in enumerate(self.sockets)))

    async def _read_acks(self, ws, started: dict, slot) -> None:
        async for raw in ws:
            now = time.perf_counter()
            frame = json.loads(raw)
            kind = frame.get("type")
            if kind == "call_ack" and frame.get("callId") in started:
                self.latencies.append((now - started.pop(frame["callId"])) * 1000)
                self.acked.append(frame["callId"])
                self.last_ack = time.time()
                self.in_window += now <= self.window_end
                if slot:
                    slot.release()
            elif kind == "error":
                self.errors[frame.get("code", "?")] = self.errors.get(frame.get("code", "?"), 0) + 1
                if frame.get("callId") in started:
                    started.pop(frame["callId"])
                    if slot:
                        slot.release()
            else:
                self.other_frames += 1

    async def status(self) -> None:
        readers = [asyncio.create_task(self._read_status(ws)) for ws in self.sockets]
        await self._schedule(lambda i, ws, _q: self._send_call(ws, {}, i), None)
        # Let the calls run to their end (they are short with a small SIMULATED_STEP_SECONDS).
        await asyncio.sleep(self.config.get("settle", 3.0))
        for task in readers:
            task.cancel()

    async def _read_status(self, ws) -> None:
        async for raw in ws:
            now_ms = time.time() * 1000
            frame = json.loads(raw)
            if frame.get("type") == "call_status":
                # ts is the state change's updated_at, written in the committing transaction
                # (whole milliseconds, so this reads up to 1 ms high).
                latency = now_ms - frame["ts"]
                self.latencies.append(latency)
                self.by_status.setdefault(frame["status"], []).append(latency)
            elif frame.get("type") == "error":
                self.errors[frame.get("code", "?")] = self.errors.get(frame.get("code", "?"), 0) + 1
            else:
                self.other_frames += 1

    async def submit(self) -> None:
        waiting = {call["callId"] for call in self.config["calls"]}
        readers = [asyncio.create_task(self._read_submit_acks(ws, waiting)) for ws in self.sockets]
        for i, call in enumerate(self.config["calls"]):
            frame = {"type": "call", "to": "+442079460123", **call}
            await self.sockets[i % len(self.sockets)].send(json.dumps(frame))
            self.sent += 1
        await self._drain(lambda: len(waiting))
        self.lost = len(waiting)
        for task in readers:
            task.cancel()

    async def _read_submit_acks(self, ws, waiting: set) -> None:
        async for raw in ws:
            now = time.time()
            frame = json.loads(raw)
            kind, call_id = frame.get("type"), frame.get("callId")
            if kind == "call_ack" and call_id in waiting:
                waiting.discard(call_id)
                self.acked_at.append((call_id, now))
            elif kind == "error":
                self.errors[frame.get("code", "?")] = self.errors.get(frame.get("code", "?"), 0) + 1
                waiting.discard(call_id)
            else:
                self.other_frames += 1  # call_status of earlier calls, among others

    async def probe(self) -> None:
        readers = [asyncio.create_task(self._read_probes(ws)) for ws in self.sockets]
        await _stdin_line()
        for task in readers:
            task.cancel()

    async def _read_probes(self, ws) -> None:
        async for raw in ws:
            now = time.time()
            frame = json.loads(raw)
            if frame.get("type") == "bench_probe":
                self.latencies.append((now - frame["t"]) * 1000)
            else:
                self.other_frames += 1

    # --- shared -------------------------------------------------------------------------------
    async def _schedule(self, send_one, queues) -> None:
        """Send frame i at start + i/rate whatever the replies do (open loop)."""
        rate, seconds = self.config["rate"], self.config["seconds"]
        total = max(1, int(rate * seconds))
        start = time.perf_counter()
        i = 0
        while i < total:
            due = start + i / rate
            now = time.perf_counter()
            if due > now:
                await asyncio.sleep(due - now)
            n = i % len(self.sockets)
            await send_one(i, self.sockets[n], queues[n] if queues else None)
            self.sent = max(self.sent, i + 1)
            i += 1

    async def _drain(self, outstanding) -> None:
        wait = self.config.get("drain") or DRAIN_SECONDS.get(self.config["mode"], 3.0)
        end = time.monotonic() + wait
        while outstanding() and time.monotonic() < end:
            await asyncio.sleep(0.05)

    def result(self) -> dict:
        out = {
            "connected": len(self.sockets),
            "failed": self.failed,
            "sent": self.sent,
            "latencies": [round(x, 3) for x in self.latencies],
            "errors": self.errors,
            "other_frames": self.other_frames,
            "lost": self.lost,
            "in_window": self.in_window,
        }
        if self.acked:
            out["acked"] = self.acked
        if self.acked_at:
            out["acked_at"] = self.acked_at
        if self.first_sent is not None:
            out["first_sent"], out["last_ack"] = self.first_sent, self.last_ack
        if self.by_status:
            out["by_status"] = {k: [round(x, 3) for x in v] for k, v in self.by_status.items()}
        return out


async def _stdin_line() -> str:
    return (await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)).strip()


def _say(tag: str, payload: dict) -> None:
    sys.stdout.write(f"{tag} {json.dumps(payload)}\n")
    sys.stdout.flush()


async def main(config: dict) -> None:
    client = Client(config)
    await client.open_all()
    _say("READY", {"connected": len(client.sockets), "failed": client.failed})
    while True:
        command = await _stdin_line()
        if not command.startswith("RUN "):
            break  # STOP, or stdin closed
        client.reset(json.loads(command[4:]))
        if client.sockets and config["mode"] != "idle":
            await getattr(client, config["mode"])()
        _say("RESULT", client.result())
    await client.close_all()


if __name__ == "__main__":
    # The config is a file: a thousand JWTs would overflow one command-line argument.
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    try:
        asyncio.run(asyncio.wait_for(main(cfg), cfg["deadline"]))
    except TimeoutError:
        sys.stderr.write("wsclient: deadline reached\n")
        sys.exit(3)
