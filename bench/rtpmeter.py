"""The bench's RTP instrument: for sip_forward_100 (bench/forward.py starts it) both ends'
media of bridged calls, timing every packet's one pass through the telephony agent; for
sip_200_calls (bench/scenarios/sip_legs.py) the far end's media of played calls, timing every
packet of the agent's against its stream's 20 ms schedule.

    rtpmeter.py bridge --messages LOG --a-port A --b-port B --legs N --seconds S --out OUT
    rtpmeter.py direct --a-port A --b-port B --legs N --seconds S --out OUT
    rtpmeter.py far-end --a-port A --out OUT

Socket A (127.0.0.1:A) is every caller's media (the callers' SDP names it), socket B every
target's (the targets' 200 OK names it); SIPp does the SIP of both ends and no media.

`bridge`: the caller SIPp's message log (LOG) is tailed for the agent's 200 OK to each
caller, whose SDP names the agent's RTP port of that caller's leg. From then on, for S
seconds, A sends that port 20 ms RTP packets (PCMA, 160 bytes of payload) that carry in
their payload which leg they belong to, a sequence number and the wall clock of the send
(time.time_ns(), read just before sendto). The agent relays each to the bridged target,
that is to B, from its RTP port of the target's leg: the first such packet pairs that port
with its caller, and from then on B sends that port packets of its own the same way, which
the agent relays to A. Every packet is timed from that clock reading to the kernel's
receive stamp of its relayed copy (SO_TIMESTAMPNS), which on loopback is taken as the
sender's sendto hands the datagram over, so this loop's lateness in reading never counts:
what is measured is this process's sendto (the floor, see `direct`), the wait in the agent's
socket until its event loop reads the packet, and the relay up to the agent's sendto.
Payloads are relayed unchanged only between legs of one codec: both ends answer PCMA.

`direct`: the floor of the instrument, no agent: N flows from A to B and N from B to A at
the same packet rate for S seconds, timed the same way.

`far-end`: socket A is the media the far end's SDP names, so every stream the agent plays
arrives there; each packet is sent back to its source as it came, as SIPp's -rtp_echo does,
so the agent reads its audio back as in a call with echo. Each packet's kernel receive stamp
(on loopback: the agent's sendto) is compared with its stream's ideal schedule, the first
packet's stamp plus n x 20 ms, n its sequence number's distance from the first's: the send
jitter, judged by a clock that is not the agent's. A stream is a source port and SSRC. Runs
until SIGTERM, then writes per stream its packets, first and last stamp (epoch seconds),
sequence numbers missing, and every packet's deviation (ms, + late) to OUT (JSON).

The result of `bridge` and `direct` (JSON, OUT): packets sent and received each way,
packets that arrived on a leg other than theirs (cross-talk between bridges), and the delays'
percentiles, overall and per second of the run; every received packet's arrival and delay in
OUT.packets (doubles).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import random
import re
import resource
import selectors
import signal
import socket
import struct
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path

from bench.stats import per_second, summary

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux (asm-generic); not in Python 3.11
FRAME_NS = 20_000_000  # 20 ms packets, as phones and Relay send them
PAYLOAD_TYPE = 8  # PCMA
MAGIC = b"RLYB"
TAG = struct.Struct("!4sBxHIQ")  # magic, direction, leg, sequence, send time (ns)
PAD = b"\xd5" * (160 - TAG.size)  # the rest of 20 ms of A-law: silence
RTP = struct.Struct("!BBHII")
BUFFER = 4 * 1024 * 1024  # SO_RCVBUF/SO_SNDBUF asked (the kernel caps at rmem_max/wmem_max)
TO_TARGET, TO_CALLER = 0, 1  # directions: A -> agent -> B, B -> agent -> A
SEPARATOR = re.compile(r"^-{20,} \d{4}-\d\d-\d\d [\d:.]+\s*$", re.MULTILINE)


class Flow:
    """One leg's packets one way: from `sock` to the agent's `port` until `end_ns`."""

    def __init__(self, sock, port: int, direction: int, leg: int, start_ns: int, end_ns: int):
        self.sock, self.dest = sock, ("127.0.0.1", port)
        self.direction, self.leg, self.end_ns = direction, leg, end_ns
        self.due = start_ns
        self.seq = random.getrandbits(16)
        self.timestamp = random.getrandbits(32)
        self.ssrc = random.getrandbits(32)
        self.count = 0
        self.sent = 0

    def send(self) -> None:
        header = RTP.pack(0x80, PAYLOAD_TYPE, self.seq, self.timestamp, self.ssrc)
        tag = TAG.pack(MAGIC, self.direction, self.leg, self.count, time.time_ns())
        # OSError: an ICMP error of an earlier packet (the leg's port closed); counted lost.
        with contextlib.suppress(OSError):
            self.sock.sendto(header + tag + PAD, self.dest)
        self.sent += 1
        self.count += 1
        self.seq = (self.seq + 1) & 0xFFFF
        self.timestamp = (self.timestamp + 160) & 0xFFFFFFFF


def udp_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


def datagrams(sock: socket.socket):
    """Every datagram waiting on the non-blocking `sock`, as (data, kernel receive stamp in
    epoch ns, source)."""
    while True:
        try:
            data, ancillary, _, source = sock.recvmsg(2048, socket.CMSG_SPACE(16))
        except BlockingIOError:
            return
        yield data, kernel_stamp(ancillary), source


def kernel_stamp(ancillary) -> int:
    """A datagram's SO_TIMESTAMPNS receive stamp (epoch ns), or now when the kernel gave none."""
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = struct.unpack("qq", value[:16])
            return seconds * 1_000_000_000 + nanoseconds
    return time.time_ns()


class AgentPorts:
    """The agent's RTP port of each caller's leg, from the caller SIPp's message log: the SDP
    of the 200 OK to each INVITE (its resends counted once)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.pending = path, 0, ""
        self.seen: set[str] = set()

    def new(self) -> list[int]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        text = self.pending + chunk.decode("latin-1")
        parts = SEPARATOR.split(text)
        self.pending = parts.pop()  # the last block may be incomplete until the next stamp
        ports = []
        for block in parts:
            if "message received" not in block or "SIP/2.0 200" not in block:
                continue
            cseq = re.search(r"^CSeq:\s*\d+\s+INVITE", block, re.MULTILINE | re.IGNORECASE)
            call_id = re.search(r"^Call-ID:\s*(\S+)", block, re.MULTILINE | re.IGNORECASE)
            media = re.search(r"^m=audio (\d+) ", block, re.MULTILINE)
            if cseq and call_id and media and call_id.group(1) not in self.seen:
                self.seen.add(call_id.group(1))
                ports.append(int(media.group(1)))
        return ports


class Meter:
    def __init__(self, a_port: int, b_port: int):
        self.a, self.b = udp_socket(a_port), udp_socket(b_port)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.a, selectors.EVENT_READ, TO_CALLER)  # what A receives
        self.selector.register(self.b, selectors.EVENT_READ, TO_TARGET)
        self.flows: list[Flow] = []
        self.heap: list[tuple[int, int]] = []
        self.delays = (array("q"), array("q"))  # ns, per direction
        self.arrivals = (array("d"), array("d"))  # seconds since start, per direction
        self.received = [0, 0]
        self.foreign = 0  # datagrams without the meter's tag
        self.crossed = 0  # a packet of one leg arriving from another leg's port
        self.pairs: dict[int, int] = {}  # the agent's target-leg port -> leg
        self.start_ns = time.monotonic_ns()
        self.wall_start_ns = time.time_ns()

    def add(self, flow: Flow) -> None:
        self.flows.append(flow)
        heapq.heappush(self.heap, (flow.due, len(self.flows) - 1))

    def send_due(self) -> None:
        now = time.monotonic_ns()
        while self.heap and self.heap[0][0] <= now:
            _, index = heapq.heappop(self.heap)
            flow = self.flows[index]
            flow.send()
            flow.due += FRAME_NS
            if flow.due < flow.end_ns:
                heapq.heappush(self.heap, (flow.due, index))

    def receive(self, timeout: float, on_packet) -> None:
        for key, _ in self.selector.select(timeout):
            sock, direction = key.fileobj, key.data
            for data, arrived, source in datagrams(sock):
                header = 12 + 4 * (data[0] & 0x0F) if data else 0
                tag = data[header : header + TAG.size]
                if len(tag) < TAG.size or not tag.startswith(MAGIC):
                    self.foreign += 1
                    continue
                _, sent_direction, leg, _, sent_ns = TAG.unpack(tag)
                if sent_direction != direction:
                    self.crossed += 1
                    continue
                self.received[direction] += 1
                self.delays[direction].append(arrived - sent_ns)
                self.arrivals[direction].append((arrived - self.wall_start_ns) / 1e9)
                on_packet(direction, leg, source[1])

    def next_timeout(self, *others: int) -> float:
        due = [self.heap[0][0]] if self.heap else []
        due += [t for t in others if t]
        if not due:
            return 0.05
        return max(0.0, (min(due) - time.monotonic_ns()) / 1e9)

    def dump(self, path: Path) -> None:
        """Every packet received, as (direction, arrival in seconds since the meter started,
        delay in ms) doubles, for the harness to read any window of the run."""
        out = array("d")
        for direction in (0, 1):
            for at, delay in zip(self.arrivals[direction], self.delays[direction], strict=True):
                out.extend((direction, at, delay / 1e6))
        with path.open("wb") as f:
            out.tofile(f)

    def result(self, **extra) -> dict:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        sent = [0, 0]
        for flow in self.flows:
            sent[flow.direction] += flow.sent
        both = array("q", self.delays[0])
        both.extend(self.delays[1])
        return {
            "sent": sent,
            "received": self.received,
            "foreign": self.foreign,
            "crossed": self.crossed,
            "flows": [sum(1 for f in self.flows if f.direction == d) for d in (0, 1)],
            "delay_ms": {
                "all": summary(both),
                "to_target": summary(self.delays[0]),
                "to_caller": summary(self.delays[1]),
            },
            "per_second": per_second(self.delays, self.arrivals),
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "wall_start": self.wall_start_ns / 1e9,
            "wall_s": (time.monotonic_ns() - self.start_ns) / 1e9,
            **extra,
        }


def bridge(args) -> tuple[Meter, dict]:
    meter = Meter(args.a_port, args.b_port)
    ports = AgentPorts(Path(args.messages))
    seconds_ns = int(args.seconds * 1e9)
    legs_end: dict[int, int] = {}  # leg -> when its caller's flow ends
    caller_ports: dict[int, int] = {}  # leg -> the agent's port of its caller's leg
    deadline = time.monotonic_ns() + int(args.deadline * 1e9)

    def on_packet(direction: int, leg: int, source_port: int) -> None:
        if direction != TO_TARGET:
            if caller_ports.get(leg) != source_port:
                meter.crossed += 1
            return
        known = meter.pairs.get(source_port)
        if known is None:
            meter.pairs[source_port] = leg
            now = time.monotonic_ns()
            # Random phase, as a phone's clock is its own.
            start = now + random.randrange(FRAME_NS)
            meter.add(Flow(meter.b, source_port, TO_CALLER, leg, start, legs_end[leg]))
        elif known != leg:
            meter.crossed += 1

    next_poll = 0
    drain_until = None
    while True:
        now = time.monotonic_ns()
        if now >= next_poll:
            for port in ports.new():
                leg = len(legs_end)
                start = now + random.randrange(FRAME_NS)
                legs_end[leg] = start + seconds_ns
                caller_ports[leg] = port
                meter.add(Flow(meter.a, port, TO_TARGET, leg, start, legs_end[leg]))
            next_poll = now + 10_000_000
        if drain_until is None and len(legs_end) >= args.legs and not meter.heap:
            drain_until = now + 500_000_000  # the last packets' way back
        if (drain_until is not None and now >= drain_until) or now >= deadline:
            break
        meter.receive(meter.next_timeout(next_poll), on_packet)
        meter.send_due()
    return meter, meter.result(legs=len(legs_end), paired=len(meter.pairs))


def direct(args) -> tuple[Meter, dict]:
    meter = Meter(args.a_port, args.b_port)
    now = time.monotonic_ns()
    end = now + int(args.seconds * 1e9)
    for leg in range(args.legs):
        for sock, port, direction in ((meter.a, args.b_port, TO_TARGET),
                                      (meter.b, args.a_port, TO_CALLER)):  # fmt: skip
            meter.add(Flow(sock, port, direction, leg, now + random.randrange(FRAME_NS), end))
    drain_until = None
    while True:
        now = time.monotonic_ns()
        if drain_until is None and not meter.heap:
            drain_until = now + 200_000_000
        if drain_until is not None and now >= drain_until:
            break
        meter.receive(meter.next_timeout(), lambda *_: None)
        meter.send_due()
    return meter, meter.result(legs=args.legs, paired=args.legs)


class Schedule:
    """One stream's packets at the far end against its ideal schedule: the first packet's
    stamp plus 20 ms per sequence number since (unwrapped, so a lost packet costs no drift)."""

    __slots__ = ("first_ns", "last_ns", "first_seq", "seq", "packets", "deviations")

    def __init__(self, arrived: int, seq: int):
        self.first_ns = self.last_ns = arrived
        self.first_seq = self.seq = seq  # seq: the last one, unwrapped
        self.packets = 0
        self.deviations = array("q")  # ns, + late

    def add(self, arrived: int, seq: int) -> None:
        step = ((seq - self.seq + 0x8000) & 0xFFFF) - 0x8000
        self.seq += step
        self.last_ns = max(self.last_ns, arrived)
        self.packets += 1
        ideal = self.first_ns + (self.seq - self.first_seq) * FRAME_NS
        self.deviations.append(arrived - ideal)

    def result(self, port: int, ssrc: int) -> dict:
        expected = self.seq - self.first_seq + 1
        return {
            "port": port,
            "ssrc": ssrc,
            "packets": self.packets,
            "missing": max(0, expected - self.packets),
            "first": self.first_ns / 1e9,
            "last": self.last_ns / 1e9,
            "deviation_ms": [round(d / 1e6, 4) for d in self.deviations],
        }


def listening(args) -> tuple[socket.socket, selectors.BaseSelector, Callable[[], bool]]:
    """The far end's socket A, a selector on it, and whether to go on: until SIGTERM or
    --deadline."""
    sock = udp_socket(args.a_port)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    deadline = time.monotonic() + args.deadline
    return sock, selector, lambda: not stopping and time.monotonic() < deadline


def far_end(args) -> dict:
    sock, selector, going = listening(args)
    streams: dict[tuple[int, int], Schedule] = {}
    foreign = 0
    while going():
        if not selector.select(0.2):
            continue
        for data, arrived, source in datagrams(sock):
            # OSError: an ICMP error of an earlier echo (the call's port closed).
            with contextlib.suppress(OSError):
                sock.sendto(data, source)
            if len(data) < RTP.size or data[0] >> 6 != 2:
                foreign += 1
                continue
            _, _, seq, _, ssrc = RTP.unpack_from(data)
            key = (source[1], ssrc)
            stream = streams.get(key)
            if stream is None:
                stream = streams[key] = Schedule(arrived, seq)
            stream.add(arrived, seq)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "streams": [stream.result(*key) for key, stream in streams.items()],
        "foreign": foreign,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("bridge", "direct", "far-end"))
    parser.add_argument("--messages", default="")
    parser.add_argument("--a-port", type=int, required=True)
    parser.add_argument("--b-port", type=int)
    parser.add_argument("--legs", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--deadline", type=float, default=300)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.mode in ("bridge", "direct") and None in (args.b_port, args.legs, args.seconds):
        parser.error(f"{args.mode} needs --b-port, --legs and --seconds")
    if args.mode == "far-end":
        write_json(Path(args.out), far_end(args))
        return 0
    meter, result = bridge(args) if args.mode == "bridge" else direct(args)
    meter.dump(Path(args.out + ".packets"))
    write_json(Path(args.out), result)
    return 0


def write_json(path: Path, result: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
