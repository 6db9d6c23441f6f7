"""The TLS far end of the bench's SIP scenarios (issue 26): Kamailio 5.6 as a stateful proxy
that terminates TLS on loopback and relays to SIPp over UDP (SIPp 3.6 speaks no TLS).

Relay --TLS--> Kamailio --UDP--> SIPp. Kamailio record-routes each INVITE (twice, as it
changes transport), so the ACK and BYE come back through it over the same TLS connection.
Media never touches it: the SDP goes through unchanged, and RTP (or SRTP) flows between
Relay and SIPp directly. Its certificate is issued for 127.0.0.1 by a CA made for the run
(harness/certs.py), which the agents trust through SIP_TLS_CA_FILE. It starts, and its
configuration begins, and it handles what comes inside a dialog, as the interop tests'
Kamailio does (harness/kamailio.py); where a new request goes is its own.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from bench.procs import tree_cpu_seconds
from harness.certs import TestCA
from harness.kamailio import (
    KamailioProcess,
    available,
    config_head,
    fill,
    in_dialog,
    tls_config,
    tls_module,
)
from harness.ports import free_port, tcp_listening

ROUTES = r"""modparam("tm", "fr_inv_timer", 60000)

request_route {
    if (!mf_process_maxfwd_header("10")) {
        sl_send_reply("483", "Too Many Hops");
        exit;
    }
@in_dialog@    if (is_method("INVITE")) {
        record_route();
    }
    # Every new request goes to SIPp, as a sip: URI over UDP.
    $ru = "sip:" + $rU + "@127.0.0.1:@sipp_port@";
    route(RELAY);
}

route[RELAY] {
    if (!t_relay()) {
        sl_reply_error();
    }
    exit;
}
"""


class Kamailio(KamailioProcess):
    """Kamailio in the foreground: TLS on 127.0.0.1:`tls_port` toward Relay, UDP toward SIPp
    on `sipp_port`. `ca` is the bundle a client must trust; `uri` the agents' trunk."""

    def __init__(self, workdir: Path, *, sipp_port: int):
        if why := available(tls=True):
            raise RuntimeError(why)
        workdir.mkdir(parents=True, exist_ok=True)
        authority = TestCA(workdir / "ca", "Relay bench CA")
        issued = authority.issue("kamailio", "127.0.0.1", "localhost")
        self.ca = authority.cert
        self.tls_port, self.udp_port = free_port(), free_port()
        listen = "\n".join((
            "enable_tls=yes",
            f"listen=udp:127.0.0.1:{self.udp_port}",
            f"listen=tls:127.0.0.1:{self.tls_port}",
            f'alias="127.0.0.1:{self.tls_port}"',
            f'alias="127.0.0.1:{self.udp_port}"',
        ))  # fmt: skip
        head = config_head(by="bench/kamailio.py: a TLS-terminating stateful proxy for SIPp",
                           listen=listen, children=2, tcp_lifetime=3600)  # fmt: skip
        loads_tls = tls_module(tls_config(workdir / "tls.cfg", cert=issued, ca=self.ca))
        cfg = workdir / "kamailio.cfg"
        routes = fill(ROUTES, {"in_dialog": in_dialog(), "sipp_port": sipp_port})
        cfg.write_text(head + loads_tls + routes)
        super().__init__(cfg, log=workdir / "kamailio.log", memory=(128, 16))
        self.uri = f"sips:127.0.0.1:{self.tls_port}"
        self.wait_started(lambda: tcp_listening(self.tls_port), deadline=20,
                          what="Kamailio to listen for TLS")  # fmt: skip
        self.ps = psutil.Process(self.proc.pid)

    def cpu_seconds(self) -> float:
        """Kamailio's CPU so far: its main process and the workers it forked."""
        return tree_cpu_seconds([self.ps])
