"""Relay against real SIP peers (DESIGN §5.7, "the SIP world, not only SIPp"): Kamailio 5.6
as a carrier-like edge proxy (harness/kamailio.py says how it routes and what it logs),
baresip as the phone at the other end (harness/baresip.py); a callee's baresip answers at once.

Over TLS (the `tls` transport) every hop is TLS, with certificates of a test CA
(harness/certs.py), and media is SRTP: Relay has SIP_SRTP=required, baresip
`mediaenc=srtp-mand`.

A test that needs Kamailio, baresip, espeak-ng or sox (and, over TLS, Kamailio's tls module
and baresip's srtp module) skips naming what is missing; in CI (CI=true) it fails instead,
because .ci/run installs them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.baresip import BARESIP_MODULES, Baresip
from harness.certs import TestCA
from harness.kamailio import (
    KAMAILIO_MODULES,
    TRUNK_PASSWORD,
    TRUNK_USER,
    Kamailio,
    free_dual_port,
)
from harness.live import RelayProcess, wait_until
from harness.ports import tcp_listening, udp_port_taken
from tests.telephony.conftest import sip_env

# The phones' interop modules (outbound, inbound, forwarding, the browser) ask whether Relay's
# SIP and media work with Kamailio and baresip: what they store goes through the services the
# Interop with Kamailio and baresip runs wherever the SIP suite runs: in CI, the PostgreSQL
# pass (tests/scheduling.py: every test whose outcome can depend on the database runs there,
# and calls are recorded in it).

TOOLS = ("kamailio", "baresip", "espeak-ng", "sox")
# What the `tls` transport needs besides: Debian's kamailio-tls-modules, and baresip-core's
# SRTP module.
TLS_MODULES = (KAMAILIO_MODULES / "tls.so", BARESIP_MODULES / "srtp.so")
CALLER = "+447700900123"  # a caller of the mobile range (harness/kamailio.py's CALLEE says why)


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CI"):
        return  # in CI a missing tool fails the tests that need it
    missing = missing_tools()
    missing_tls = [str(path) for path in TLS_MODULES if not path.exists()]
    reason = (
        f"needs {', '.join(missing)} (Debian: apt-get install kamailio baresip-core espeak-ng sox)"
    )
    tls_reason = f"needs {', '.join(missing_tls)} (Debian: apt-get install kamailio-tls-modules)"
    here = str(Path(__file__).parent)
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        if missing:
            item.add_marker(pytest.mark.skip(reason=reason))
        elif missing_tls and item_transport(item) == "tls":
            item.add_marker(pytest.mark.skip(reason=tls_reason))


def item_transport(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("transport") if callspec is not None else None


def expected_sdp(transport: str) -> str:
    """What every SDP of a call over `transport` shows in Kamailio's log: over TLS, SRTP
    (Relay's SIP_SRTP=required, baresip's srtp-mand); else plain RTP without a key."""
    return "sdp=RTP/SAVP crypto=yes" if transport == "tls" else "sdp=RTP/AVP crypto=no"


# Module scope, not session: a Relay left running after the interop tests would claim the
# queued calls of every later test in the session (its agent polls the same database).
@pytest.fixture(scope="module", params=["udp", "tcp", "tls"])
def transport(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory) -> TestCA:
    """The CA every TLS peer of the suite trusts, and that issued their certificates."""
    return TestCA(tmp_path_factory.mktemp("interop-ca"))


@pytest.fixture(scope="module")
def edge(tmp_path_factory, django_db_setup, transport, test_ca):
    """Relay (runrelay, one agent, SIP over `transport`, calls ringing 1 s before voicemail)
    behind Kamailio, with the callee's port reserved: (relay, kamailio, callee_port). Over
    TLS Relay calls `sips:` Kamailio, takes calls on its own certificate (SIP_BIND), and
    requires SRTP; Kamailio sends callees to the TLS port, the one after `callee_port`."""
    workdir = tmp_path_factory.mktemp(f"interop-{transport}")
    relay_port, callee_port = free_dual_port(), free_dual_port()
    secure = transport == "tls"
    kamailio = Kamailio(
        workdir / "kamailio",
        transport=transport,
        relay_port=relay_port,
        callee_port=callee_port + 1 if secure else callee_port,
        ca=test_ca.cert,
        cert=test_ca.issue("kamailio", "127.0.0.1", "localhost") if secure else None,
    )
    tls = {}
    if secure:
        relay_cert = test_ca.issue("relay", "127.0.0.1")
        tls = {
            "SIP_TLS_CA_FILE": test_ca.cert,
            "SIP_TLS_CERT_FILE": relay_cert.cert,
            "SIP_TLS_KEY_FILE": relay_cert.key,
            "SIP_SRTP": "required",
        }
    env = sip_env(
        workdir,
        kamailio.port,
        SIP_TRUNK_URI=f"{'sips' if secure else 'sip'}:127.0.0.1:{kamailio.port}",
        SIP_TRANSPORT=transport,
        SIP_BIND=f"127.0.0.1:{relay_port}",
        SIP_USERNAME=TRUNK_USER,
        SIP_PASSWORD=TRUNK_PASSWORD,
        SIP_INBOUND_SOURCES="127.0.0.1",
        SIP_RING_TIMEOUT=15,
        INBOUND_RING_SECONDS=1,
        **tls,
    )
    try:
        relay = RelayProcess(workdir, log=workdir / "relay.log", **env)
    except BaseException:
        kamailio.stop()
        raise
    # /healthz answers before the agent has bound its SIP port; a TCP INVITE then would be
    # refused (Kamailio's 477), where over UDP Kamailio's retransmission would hide it.
    listening = udp_port_taken if transport == "udp" else tcp_listening
    wait_until(lambda: listening(relay_port), deadline=30, what="the agent's SIP port")
    relay.workdir = workdir
    relay.agent = f"127.0.0.1:{relay_port}"  # where a SIPp caller reaches the agent itself
    yield relay, kamailio, callee_port
    relay.stop()
    kamailio.stop()


@pytest.fixture
def relay(edge):
    return edge[0]


@pytest.fixture
def kamailio(edge):
    return edge[1]


@pytest.fixture
def phones(edge, tmp_path, transport, test_ca):
    """Start baresip: `phones("callee", number=CALLEE, source=..., answer=True)` takes the
    port Kamailio forwards callees to; any other is a caller on a port of its own. Over TLS
    each has a certificate of the test CA and requires SRTP, unless `srtp=False`. `codecs`
    are the ones it offers or accepts, in order. Stopped at teardown."""
    started = []
    callee_port = edge[2]

    def start(
        name: str,
        *,
        number: str,
        source: Path,
        answer: bool = False,
        srtp: bool = True,
        codecs: str = "PCMU,PCMA",
        also: tuple[str, ...] = (),
    ) -> Baresip:
        tls = None
        if transport == "tls":
            leaf = test_ca.issue(f"{tmp_path.name}-{name}", "127.0.0.1", "localhost")
            tls = (test_ca.cert, leaf.bundle)
        phone = Baresip(
            tmp_path / name,
            number=number,
            source=source,
            transport=transport,
            answer=answer,
            port=callee_port if name == "callee" else None,
            tls=tls,
            mediaenc="srtp-mand" if tls and srtp else None,
            codecs=codecs,
            also=also,
        )
        started.append(phone)
        return phone

    yield start
    for phone in started:
        phone.stop()
