"""SIP over TLS (issue 26, part 3): the trunk's certificate is verified against its name, and
a trunk that fails verification ends the call `failed`, saying so, without a byte of SIP
leaving in clear over TCP or UDP. (Calls that do go through over TLS, with SRTP, are proved
against baresip and Kamailio in tests/telephony/interop.)"""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from calls.states import TERMINAL_STATES
from harness.certs import TestCA
from harness.live import AgentProcess, wait_until
from harness.ports import free_port
from tests.telephony.conftest import sip_env, status_of, submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class TlsTrunk:
    """A TLS listener on loopback with `cert`, counting the handshakes it completed and the
    bytes of SIP it was sent; and a UDP socket on the same port, to see any fallback."""

    def __init__(self, cert) -> None:
        self.port = free_port()
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert.cert, cert.key)
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.settimeout(0.2)
        self.attempts = self.handshakes = self.sip_bytes = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.attempts += 1
            with conn:
                try:
                    with self.context.wrap_socket(conn, server_side=True) as tls:
                        self.handshakes += 1
                        tls.settimeout(5)
                        self.sip_bytes += len(tls.recv(65536))
                except (OSError, ssl.SSLError):
                    continue

    def datagrams(self) -> int:
        count = 0
        while True:
            try:
                self.udp.recv(65536)
            except TimeoutError:
                return count
            count += 1

    def close(self) -> None:
        self.listener.close()
        self.udp.close()


def call_through(user, tmp_path, trunk_uri: str, **settings):
    env = sip_env(tmp_path, 0, SIP_TRUNK_URI=trunk_uri, SIP_TRANSPORT="tls", **settings)
    agent = AgentProcess(tmp_path, env)
    try:
        placed = submit(user, "tls-call")
        wait_until(
            lambda: status_of(placed) in TERMINAL_STATES, deadline=30, what="the call to end"
        )
    finally:
        agent.stop()
    return placed


@pytest.mark.parametrize(
    ("trusted", "names", "why"),
    [
        (False, ("localhost", "127.0.0.1"), "unable to get local issuer certificate"),
        (True, ("trunk.other.test",), "IP address mismatch"),
    ],
    ids=["unknown issuer", "another name"],
)
def test_a_trunk_whose_certificate_does_not_verify_fails_the_call_and_nothing_is_sent(
    user, tmp_path, trusted, names, why
):
    ours, theirs = TestCA(tmp_path / "ours"), TestCA(tmp_path / "theirs", "Another CA")
    trunk = TlsTrunk((ours if trusted else theirs).issue("trunk", *names))
    try:
        placed = call_through(
            user, tmp_path, f"sips:127.0.0.1:{trunk.port}", SIP_TLS_CA_FILE=ours.cert
        )
        datagrams = trunk.datagrams()
    finally:
        trunk.close()

    assert placed.status == "failed"
    assert placed.failure_reason.startswith("TLS certificate verification failed")
    assert why in placed.failure_reason
    assert trunk.attempts >= 1  # it tried, over TLS
    assert (trunk.handshakes, trunk.sip_bytes, datagrams) == (0, 0, 0)  # and nothing else


def test_a_trunk_with_a_good_certificate_gets_the_invite_over_tls(user, tmp_path):
    ca = TestCA(tmp_path / "ca")
    trunk = TlsTrunk(ca.issue("trunk", "localhost", "127.0.0.1"))
    try:
        placed = call_through(
            user,
            tmp_path,
            f"sips:127.0.0.1:{trunk.port}",
            SIP_TLS_CA_FILE=ca.cert,
            SIP_RING_TIMEOUT=2,
        )
    finally:
        trunk.close()

    assert trunk.handshakes == 1
    assert trunk.sip_bytes > 0  # the INVITE, inside TLS
    # The listener answers nothing: no response at all within the ring timeout.
    assert (placed.status, placed.failure_reason) == ("failed", "408 Request Timeout")
