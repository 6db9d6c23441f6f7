"""The ports the tests and the bench hand to the servers they start, and whether something
holds one now.

A port found by asking the kernel for a free one (bind to 0) is free only until its server
binds it, and under pytest-xdist several workers pick ports at once: two could be handed the
same one. So every worker picks from a band of its own, below the kernel's ephemeral range
(32768 up, where clients' connections and bind-to-0 draw from): single ports from one part,
RTP ranges from another, each in turn from a random start, skipping any port something holds
now. Outside xdist (a plain pytest run, the bench) the band is the whole part.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

SINGLE_PORTS = range(10000, 19000)
RTP_PORTS = range(19000, 32768)


def worker_band(ports: range) -> range:
    """This xdist worker's share of `ports`; all of them outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return ports
    index, count = int(worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    size = len(ports) // max(count, index + 1)
    return range(ports.start + index * size, ports.start + (index + 1) * size)


def port_free(port: int) -> bool:
    """Nothing holds `port` on 127.0.0.1, for TCP or UDP."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


class PortPicker:
    """Ports of one band, handed out in turn, so that this process never hands out a port
    twice until it has gone round the whole band."""

    def __init__(self, ports: range) -> None:
        self.ports = ports
        self.cursor = ports.start + secrets.randbelow(len(ports))

    def take(self, width: int = 1, *, align: int = 1) -> int:
        """The first of `width` ports in a row (the first a multiple of `align`), all free."""
        for _ in range(len(self.ports)):
            first = self.cursor + (-self.cursor % align)
            if first + width > self.ports.stop:
                self.cursor = self.ports.start
                continue
            self.cursor = first + width
            if all(port_free(port) for port in range(first, first + width)):
                return first
        raise AssertionError(f"no {width} free ports in a row in {self.ports}")


_single_ports = PortPicker(worker_band(SINGLE_PORTS))
_rtp_ports = PortPicker(worker_band(RTP_PORTS))


def free_port(width: int = 1) -> int:
    """A port free for TCP and UDP on 127.0.0.1 (with the `width - 1` ports above it), never
    handed out to another test running at the same time."""
    return _single_ports.take(width)


def free_rtp_range(width: int) -> range:
    """`width` ports in a row from an even one, for a server's RTP_PORT_RANGE."""
    first = _rtp_ports.take(width, align=2)
    return range(first, first + width)


def rtp_range(width: int = 400) -> str:
    """A range of RTP ports of the caller's own, as RTP_PORT_RANGE and baresip name it
    ("first-last"), away from the ephemeral ports and from every port handed out to another
    test (the port bands above)."""
    ports = free_rtp_range(width)
    return f"{ports.start}-{ports.stop - 1}"


def udp_port_taken(port: int) -> bool:
    """Something in this network namespace holds UDP `port`. Read from the kernel's socket
    tables, never by binding the port: a probe that bound it would, for its moment, make the
    very server it waits for fail its own bind ("Address already in use", seen with SIPp)."""
    suffix = f":{port:04X}"
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        if any(line.split()[1].endswith(suffix) for line in lines if line.strip()):
            return True
    return False


def tcp_listening(port: int) -> bool:
    """Something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
