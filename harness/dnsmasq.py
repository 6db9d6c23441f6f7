"""dnsmasq as the authority of a test's own domain, for SIP's DNS (SRV, NAPTR, A records)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.live import ChildProcess
from harness.ports import free_port, udp_port_taken


class Dnsmasq(ChildProcess):
    """dnsmasq (Debian `dnsmasq`) on 127.0.0.1:`port`, the authority for `domain` from
    `records` (its options: "--srv-host=...", "--naptr-record=...", "--host-record=...").
    Any other name under `domain` is NXDOMAIN; names outside it are refused. Its queries are
    logged to dnsmasq.log in `workdir`."""

    stop_grace = 5

    def __init__(self, workdir: Path, records: list[str], *, domain: str = "relay.test"):
        workdir.mkdir(parents=True, exist_ok=True)
        # Free for UDP and TCP: it binds both, and a port free only for UDP once stopped it at
        # start with "Address already in use".
        self.port = free_port()
        argv = [
            "dnsmasq",
            "--keep-in-foreground",
            "--conf-file=/dev/null",  # nothing of the machine's own configuration
            "--no-resolv",
            "--no-hosts",
            "--pid-file=",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            f"--port={self.port}",
            f"--local=/{domain}/",
            "--local-ttl=60",
            "--log-facility=-",
            "--log-queries",
            *records,
        ]
        super().__init__(argv, dict(os.environ), log=workdir / "dnsmasq.log")
        self.wait_started(lambda: udp_port_taken(self.port), deadline=10, what="dnsmasq to listen")

    @property
    def address(self) -> str:
        """As SIP_DNS_SERVERS names it."""
        return f"127.0.0.1:{self.port}"
