"""The bench's far end that presses keys (sip_scripted_100): `python -m bench.rtpkeys --a-port A
--out OUT [--quiet-ms Q --spread-ms S --deadline D]`.

Socket A is the far end's media, as in bench/rtpmeter.py's `far-end`, for calls whose script
says something, then waits for a key (sip_scripted_100): once a stream has been quiet for Q ms
(plus a random share of S, so that the callers do not all press at once) after its first audio,
A presses 1 to its source (RFC 4733, payload type 101: the first packet marked, then the end
packet three times, all at once), reading the wall clock just before the first sendto. The first
packet of that source that arrives after it (its kernel receive stamp) is the next verb's first
audio: the delay from the key to it is what the agent took to hear the key, run the gather's
hook and start the next verb. Echoes nothing. Runs until SIGTERM, then writes per stream its
packets, the key's time and the delay (ms, null when nothing followed the key) to OUT (JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import resource
import socket
import struct
import sys
import time
from pathlib import Path

from bench.rtpmeter import RTP, datagrams, listening, write_json

DTMF_PAYLOAD_TYPE = 101  # what bench/sipp/answer.xml's answer names, when it offers keys
DTMF_KEY = 1


class Caller:
    """One stream at the `keys` far end: its packets, and its key once it went quiet."""

    __slots__ = ("last_ns", "packets", "quiet_ns", "key_ns", "next_ns")

    def __init__(self, arrived: int, quiet_ns: int):
        self.last_ns, self.packets, self.quiet_ns = arrived, 0, quiet_ns
        self.key_ns: int | None = None
        self.next_ns: int | None = None


def press(sock: socket.socket, dest) -> int:
    """Press DTMF_KEY to `dest` (RFC 4733): the wall clock just before the first packet."""
    ssrc, seq, timestamp = random.getrandbits(32), random.getrandbits(16), random.getrandbits(32)
    packets = []
    for n, (end, duration) in enumerate(((False, 160), (True, 480), (True, 480), (True, 480))):
        header = RTP.pack(0x80, (0x80 if n == 0 else 0) | DTMF_PAYLOAD_TYPE,
                          (seq + n) & 0xFFFF, timestamp, ssrc)  # fmt: skip
        packets.append(header + struct.pack("!BBH", DTMF_KEY, (0x80 if end else 0) | 10, duration))
    pressed = time.time_ns()
    for packet in packets:
        with contextlib.suppress(OSError):  # the call's port closed meanwhile
            sock.sendto(packet, dest)
    return pressed


def keys(args) -> dict:
    sock, selector, going = listening(args)
    callers: dict[tuple[str, int], Caller] = {}
    foreign = 0
    while going():
        selector.select(0.002)
        for data, arrived, source in datagrams(sock):
            if len(data) < RTP.size or data[0] >> 6 != 2:
                foreign += 1
                continue
            caller = callers.get(source)
            if caller is None:
                quiet = args.quiet_ms + random.uniform(0, args.spread_ms)
                caller = callers[source] = Caller(arrived, int(quiet * 1e6))
            caller.packets += 1
            caller.last_ns = max(caller.last_ns, arrived)
            if caller.key_ns is not None and caller.next_ns is None and arrived > caller.key_ns:
                caller.next_ns = arrived
        now = time.time_ns()
        for source, caller in callers.items():
            if caller.key_ns is None and now - caller.last_ns >= caller.quiet_ns:
                caller.key_ns = press(sock, source)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "streams": [
            {
                "port": source[1],
                "packets": caller.packets,
                "key": caller.key_ns / 1e9 if caller.key_ns is not None else None,
                "delay_ms": (caller.next_ns - caller.key_ns) / 1e6
                if caller.next_ns is not None and caller.key_ns is not None
                else None,
            }
            for source, caller in callers.items()
        ],
        "foreign": foreign,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--a-port", type=int, required=True)
    parser.add_argument("--deadline", type=float, default=300)
    parser.add_argument("--quiet-ms", type=float, default=150)
    parser.add_argument("--spread-ms", type=float, default=500)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    write_json(Path(args.out), keys(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
