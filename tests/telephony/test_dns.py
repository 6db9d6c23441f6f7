"""Trunks found by DNS (RFC 3263): the resolver against a real DNS server (dnsmasq), and
calls that fail over from one SRV target to the next through SIPp."""

from __future__ import annotations

import random
import re
import socket
import time
from collections import Counter

import pytest

from calls.states import TERMINAL_STATES
from harness.dnsmasq import Dnsmasq
from harness.live import AgentProcess, wait_until
from harness.sip import Sipp, free_udp_port
from telephony.sip.dns import Target, TrunkNotFound, TrunkResolver, resolve_targets
from tests.telephony.conftest import require_dnsmasq, sip_env, status_of, submit

RECORDS = [
    # NAPTR -> SRV -> A: TCP first by order, then UDP; the SIPS record and the ones that are
    # not SIP services (ENUM's E2U, a "u" flag) are there to be discarded.
    "--naptr-record=naptr.relay.test,10,50,s,SIP+D2T,,_sip._tcp.pool.relay.test",
    "--naptr-record=naptr.relay.test,20,50,s,SIP+D2U,,_sip._udp.pool.relay.test",
    "--naptr-record=naptr.relay.test,30,50,s,SIPS+D2T,,_sips._tcp.pool.relay.test",
    "--naptr-record=naptr.relay.test,5,50,u,E2U+sip,!^.*$!sip:x@y!,",
    "--srv-host=_sip._tcp.pool.relay.test,tcp.relay.test,5080,10,10",
    "--srv-host=_sip._udp.pool.relay.test,udp.relay.test,5070,10,10",
    "--srv-host=_sips._tcp.pool.relay.test,tls.relay.test,5081,10,10",
    # What the domain's own SRV names say, which NAPTR overrides.
    "--srv-host=_sip._tcp.naptr.relay.test,plain-tcp.relay.test,5090,10,10",
    "--host-record=tcp.relay.test,127.0.0.11",
    "--host-record=udp.relay.test,127.0.0.12",
    "--host-record=tls.relay.test,127.0.0.13",
    "--host-record=plain-tcp.relay.test,127.0.0.14",
    # SRV priorities: the lower first, whatever the weights; each target's A then AAAA.
    "--srv-host=_sip._udp.prio.relay.test,backup.relay.test,5072,20,100",
    "--srv-host=_sip._udp.prio.relay.test,primary.relay.test,5071,10,1",
    "--host-record=primary.relay.test,127.0.0.21,::1",
    "--host-record=backup.relay.test,127.0.0.22",
    "--host-record=prio.relay.test,127.0.0.29",
    # SRV weights within one priority: 0, 10 and 30.
    "--srv-host=_sip._udp.weights.relay.test,w00.relay.test,5060,10,0",
    "--srv-host=_sip._udp.weights.relay.test,w10.relay.test,5060,10,10",
    "--srv-host=_sip._udp.weights.relay.test,w30.relay.test,5060,10,30",
    "--host-record=w00.relay.test,127.0.0.30",
    "--host-record=w10.relay.test,127.0.0.31",
    "--host-record=w30.relay.test,127.0.0.32",
    # No NAPTR, no SRV: the domain's own address.
    "--host-record=aonly.relay.test,127.0.0.41",
    # An SRV target that is not there, and a "." target (the service is not offered).
    "--srv-host=_sip._udp.gone.relay.test,missing.relay.test,5060,10,10",
    "--srv-host=_sip._tcp.gone.relay.test",
]


@pytest.fixture(scope="module")
def dns_server(tmp_path_factory):
    require_dnsmasq()
    server = Dnsmasq(tmp_path_factory.mktemp("dnsmasq"), RECORDS)
    yield [("127.0.0.1", server.port)]
    server.stop()


async def test_naptr_leads_to_srv_and_srv_to_addresses(dns_server):
    targets = await resolve_targets("sip:naptr.relay.test", nameservers=dns_server)

    assert targets == [
        Target("tcp", "tcp.relay.test", 5080, "127.0.0.11"),
        Target("udp", "udp.relay.test", 5070, "127.0.0.12"),
        Target("tls", "tls.relay.test", 5081, "127.0.0.13"),
    ]


@pytest.mark.parametrize(
    ("uri", "transport", "expected"),
    [
        # The client's own transport keeps only its NAPTR records.
        ("sip:naptr.relay.test", "udp", Target("udp", "udp.relay.test", 5070, "127.0.0.12")),
        # sips: is TLS, and only SIPS services are kept (RFC 3263 §4.1).
        ("sips:naptr.relay.test", None, Target("tls", "tls.relay.test", 5081, "127.0.0.13")),
        ("sips:naptr.relay.test", "udp", Target("tls", "tls.relay.test", 5081, "127.0.0.13")),
        # A transport= parameter wins, and skips NAPTR: the domain's own SRV name.
        (
            "sip:naptr.relay.test;transport=tcp",
            "udp",
            Target("tcp", "plain-tcp.relay.test", 5090, "127.0.0.14"),
        ),
    ],
)
async def test_the_transport_is_the_uris_then_the_clients_then_naptrs(
    dns_server, uri, transport, expected
):
    targets = await resolve_targets(uri, transport=transport, nameservers=dns_server)

    assert targets == [expected]


async def test_srv_priorities_come_before_weights(dns_server):
    targets = await resolve_targets("sip:prio.relay.test", nameservers=dns_server)

    assert targets == [
        Target("udp", "primary.relay.test", 5071, "127.0.0.21"),
        Target("udp", "primary.relay.test", 5071, "::1"),
        Target("udp", "backup.relay.test", 5072, "127.0.0.22"),
    ]


class ScriptedRandom(random.Random):
    """Draws the numbers it is given, and notes the ranges it was asked for."""

    def __init__(self, picks: list[int]) -> None:
        super().__init__()
        self.picks, self.asked = list(picks), []

    def randint(self, a: int, b: int) -> int:
        self.asked.append((a, b))
        return self.picks.pop(0)


@pytest.mark.parametrize(
    ("picks", "order"),
    [
        # RFC 2782's draw: the weight-0 record first in the list, then by running sums 0,
        # 10, 40; a draw of n takes the first record whose running sum is >= n.
        ([0, 11, 0], ["w00", "w30", "w10"]),
        ([25, 10, 0], ["w30", "w10", "w00"]),
        ([1, 0, 0], ["w10", "w00", "w30"]),
    ],
)
async def test_srv_weights_are_drawn_as_rfc_2782_says(dns_server, picks, order):
    rng = ScriptedRandom(picks)

    targets = await TrunkResolver(dns_server, rng=rng).resolve("sip:weights.relay.test")

    assert [target.host.split(".")[0] for target in targets] == order
    remaining = 40 - {"w00": 0, "w10": 10, "w30": 30}[order[0]]
    assert rng.asked[:2] == [(0, 40), (0, remaining)]


async def test_srv_weights_share_the_first_place_in_proportion(dns_server):
    resolver = TrunkResolver(dns_server, rng=random.Random(2782))

    firsts = Counter()
    for _ in range(400):
        firsts[(await resolver.resolve("sip:weights.relay.test"))[0].host] += 1

    # Expected 30/41, 10/41 and 1/41 of 400 (the weight-0 record wins only a draw of 0).
    assert 250 <= firsts["w30.relay.test"] <= 335
    assert 60 <= firsts["w10.relay.test"] <= 135
    assert firsts["w00.relay.test"] <= 25


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sip:aonly.relay.test", Target("udp", "aonly.relay.test", 5060, "127.0.0.41")),
        ("sips:aonly.relay.test", Target("tls", "aonly.relay.test", 5061, "127.0.0.41")),
        (
            "sip:aonly.relay.test;transport=tcp",
            Target("tcp", "aonly.relay.test", 5060, "127.0.0.41"),
        ),
    ],
)
async def test_without_naptr_or_srv_the_domains_address_on_the_default_port(
    dns_server, uri, expected
):
    assert await resolve_targets(uri, nameservers=dns_server) == [expected]


async def test_an_explicit_port_skips_naptr_and_srv(dns_server):
    targets = await resolve_targets("sip:prio.relay.test:5099", nameservers=dns_server)

    assert targets == [Target("udp", "prio.relay.test", 5099, "127.0.0.29")]


@pytest.fixture
def silent_dns():
    """A DNS server that never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield [sock.getsockname()]


@pytest.mark.parametrize(
    ("uri", "transport", "expected"),
    [
        ("sip:127.0.0.1", None, Target("udp", "127.0.0.1", 5060, "127.0.0.1")),
        ("sip:127.0.0.1:5062", "tcp", Target("tcp", "127.0.0.1", 5062, "127.0.0.1")),
        ("sip:127.0.0.1;transport=tcp", "udp", Target("tcp", "127.0.0.1", 5060, "127.0.0.1")),
        ("sips:relay@[::1]", None, Target("tls", "::1", 5061, "::1")),
    ],
)
async def test_a_numeric_address_asks_no_dns(silent_dns, uri, transport, expected):
    assert await resolve_targets(uri, transport=transport, nameservers=silent_dns) == [expected]


async def test_an_unknown_host_is_not_found_by_name(dns_server):
    with pytest.raises(TrunkNotFound, match="nothere.relay.test"):
        await resolve_targets("sip:nothere.relay.test", nameservers=dns_server)


async def test_srv_targets_without_addresses_leave_the_domains_address(dns_server):
    # gone.relay.test's SRV records lead nowhere, and it has no address of its own.
    with pytest.raises(TrunkNotFound, match="gone.relay.test"):
        await resolve_targets("sip:gone.relay.test", nameservers=dns_server)


async def test_a_dns_server_that_does_not_answer_fails_within_the_timeout(silent_dns):
    started = time.monotonic()

    with pytest.raises(TrunkNotFound, match="did not answer within 0.5 s"):
        await resolve_targets("sip:trunk.relay.test", nameservers=silent_dns, timeout=0.5)

    assert time.monotonic() - started < 2


async def test_without_dns_servers_the_systems_resolution_reads_etc_hosts():
    targets = await resolve_targets("sip:localhost:5062")

    assert Target("udp", "localhost", 5062, "127.0.0.1") in targets


@pytest.mark.parametrize(
    "uri", ["http://trunk.example", "sip:", "sip:trunk.example:99999", "sip:x;transport=sctp"]
)
async def test_a_uri_that_is_not_sip_is_refused(uri):
    with pytest.raises(ValueError):
        await resolve_targets(uri)


# --- calls through a trunk found by DNS -------------------------------------------------------
def srv_trunk(workdir, first_port: int, second_port: int) -> Dnsmasq:
    """trunk.relay.test: SRV to first.relay.test:`first_port` (priority 10), then
    second.relay.test:`second_port` (priority 20), both at 127.0.0.1."""
    require_dnsmasq()
    return Dnsmasq(
        workdir / "dns",
        [
            f"--srv-host=_sip._udp.trunk.relay.test,first.relay.test,{first_port},10,10",
            f"--srv-host=_sip._udp.trunk.relay.test,second.relay.test,{second_port},20,10",
            "--host-record=first.relay.test,127.0.0.1",
            "--host-record=second.relay.test,127.0.0.1",
        ],
    )


def invite_transactions(far_end: Sipp) -> set[str]:
    """The Via branches of the INVITEs SIPp received: one per transaction."""
    return {
        re.search(r"^Via:.*;branch=([^;\s]+)", block, re.MULTILINE | re.IGNORECASE).group(1)
        for block in far_end.received("INVITE")
    }


@pytest.fixture
def call_through(user, tmp_path):
    """Place one call through an agent whose trunk is trunk.relay.test: `call_through(first,
    second, **settings)`, with SIPp's arguments for the two SRV targets (`first` None: nobody
    listens there). Returns (the call once ended, the first SIPp or None, the second SIPp,
    the agent's log); the SIPps are stopped at teardown if still running."""
    started: list[Sipp] = []

    def place(first: dict | None, second: dict, **settings):
        ports = free_udp_port(), free_udp_port()
        dns_server = srv_trunk(tmp_path, *ports)
        far_ends = []
        for n, (port, args) in enumerate(zip(ports, (first, second), strict=True)):
            far_ends.append(
                None if args is None else Sipp(tmp_path / f"sipp{n}", port=port, **args)
            )
        started.extend(far_end for far_end in far_ends if far_end is not None)
        env = sip_env(
            tmp_path,
            0,
            SIP_TRUNK_URI="sip:trunk.relay.test",
            SIP_DNS_SERVERS=dns_server.address,
            **settings,
        )
        agent = AgentProcess(tmp_path, env)
        try:
            placed = submit(user, "dns-call")
            ended = lambda: status_of(placed) in TERMINAL_STATES  # noqa: E731
            wait_until(ended, deadline=30, what="the call to end")
        finally:
            agent.stop()
            dns_server.stop()
        return placed, *far_ends, agent.log_path.read_text()

    yield place
    for far_end in started:
        if far_end.proc.poll() is None:
            far_end.stop()


@pytest.mark.django_db(transaction=True)
def test_a_call_goes_to_the_first_srv_target(call_through):
    # Bound to every address, the agent advertises the one that routes to the trunk, which
    # only the test's DNS server knows.
    wildcard = f"0.0.0.0:{free_udp_port()}"
    call, first, second, log = call_through(
        {"scenario": "uas"}, {"scenario": "uas"}, SIP_BIND=wildcard
    )

    assert call.status == "completed"
    assert "(advertised as 127.0.0.1)" in log
    assert first.finish() == 0  # INVITE, ACK and BYE all went to the first target
    assert second.invites() == []
    assert re.search(
        r"trunk targets, in order: first\.relay\.test:\d+/udp \(127\.0\.0\.1\), "
        r"second\.relay\.test:\d+/udp \(127\.0\.0\.1\)",
        log,
    ), log


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first_target", ["answers 503 at once", "nobody listens"])
def test_a_call_fails_over_to_the_next_srv_target(call_through, first_target):
    refuse = {"scenario": "reject_at_once", "status": 503, "phrase": "Service Unavailable"}
    call, first, second, log = call_through(
        refuse if first_target == "answers 503 at once" else None,
        {"scenario": "uas"},
        SIP_RING_TIMEOUT=2,  # how long a target that says nothing is given
    )

    assert call.status == "completed"
    assert second.finish() == 0  # INVITE, ACK and BYE all went to the second target
    if first is not None:
        assert first.finish() == 0  # its 503 was ACKed
        assert len(invite_transactions(first)) == 1
    assert re.search(r"trunk target first\.relay\.test:\d+/udp \(127\.0\.0\.1\) failed", log)
    assert re.search(
        r"call \S+: trunk target second\.relay\.test:\d+/udp \(127\.0\.0\.1\)$", log, re.M
    )


@pytest.mark.django_db(transaction=True)
def test_a_503_after_ringing_is_the_calls_end_not_a_failover(call_through):
    rings_then_503 = {"scenario": "reject", "status": 503, "phrase": "Service Unavailable"}
    call, first, second, log = call_through(rings_then_503, {"scenario": "uas"})

    assert (call.status, call.failure_reason) == ("failed", "503 Service Unavailable")
    assert first.finish() == 0
    assert len(invite_transactions(first)) == 1
    assert second.invites() == []  # never dialled twice
    assert re.search(r"call \S+: trunk target first\.relay\.test:\d+/udp", log)
