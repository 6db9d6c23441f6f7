"""SIP URIs a user named (a ring list's sip: entry, a transfer's target) meet webhooks' promise:
every address the agent's RFC 3263 resolution would try (NAPTR, SRV, A/AAAA) is checked with
core.urls.is_public unless WEBHOOK_ALLOW_PRIVATE, and the INVITE and every later request of
that leg go only to an address checked. The resolution against a real DNS server (dnsmasq),
and a ring list's call through the agent to a SIPp phone that DNS puts on loopback."""

from __future__ import annotations

import time

import pytest

from harness.dnsmasq import Dnsmasq
from harness.live import AgentProcess, wait_until
from harness.ports import udp_port_taken
from harness.sip import Sipp, free_udp_port, refer
from history.models import AnsweredBy, CallStatus
from telephony.sip.dns import Target, TargetRefused, allowed_targets, public_address
from telephony.sip.ua import UaConfig, UserAgent
from telephony.sip.uac import OutboundCall
from tests.telephony import test_transfer as transfer
from tests.telephony.conftest import call_in, require_dnsmasq, sip_env, wait_for_records
from tests.telephony.test_ring_groups import legs_of, ring_group

# Addresses a user's SIP host may not lead to, however the address is written.
PRIVATE = {
    "loopback": "127.0.0.1",
    "RFC 1918": "10.0.0.5",
    "link-local": "169.254.169.254",
    "IPv6 loopback": "::1",
    "IPv6 unique local": "fd00::5",
    "IPv4-mapped loopback": "::ffff:127.0.0.1",
    "IPv4-mapped RFC 1918": "::ffff:10.0.0.1",
    "IPv4-compatible": "::10.0.0.1",
    "NAT64 to loopback": "64:ff9b::7f00:1",
    "NAT64 local use": "64:ff9b:1::a00:1",
    "6to4 to RFC 1918": "2002:a00:1::1",
    "Teredo": "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "multicast": "224.0.0.1",
}
PUBLIC = {
    "IPv4": "8.8.8.8",
    "IPv4-mapped public": "::ffff:8.8.8.8",
    "NAT64 to public": "64:ff9b::808:808",
    "IPv6": "2001:4860:4860::8888",
}


def target(address: str, port: int = 5060) -> Target:
    return Target("udp", "pbx.example.com", port, address)


@pytest.mark.parametrize("address", PRIVATE.values(), ids=PRIVATE.keys())
def test_a_target_at_a_private_address_is_refused_unless_allowed(address):
    assert allowed_targets([target(address)], allow_private=False) == ([], [target(address)])
    assert allowed_targets([target(address)], allow_private=True) == ([target(address)], [])


@pytest.mark.parametrize("address", PUBLIC.values(), ids=PUBLIC.keys())
def test_a_target_at_a_public_address_is_kept(address):
    assert allowed_targets([target(address)], allow_private=False) == ([target(address)], [])


def test_only_the_private_targets_of_a_host_are_left_out_in_their_order():
    found = [target("8.8.8.8", 5070), target("127.0.0.1"), target("2001:4860:4860::8888")]

    allowed, refused = allowed_targets(found, allow_private=False)

    assert allowed == [found[0], found[2]]
    assert refused == [found[1]]


def test_a_name_is_no_public_address_until_it_is_resolved():
    assert not public_address("pbx.example.com")
    assert public_address("8.8.8.8") and not public_address("::ffff:127.0.0.1")


# --- the user agent's own resolution --------------------------------------------------------
RECORDS = [
    # A host whose SRV target is loopback, one whose own A record is, one public and private.
    "--srv-host=_sip._udp.pbx.relay.test,desk.relay.test,5070,10,10",
    "--host-record=desk.relay.test,127.0.0.1",
    "--host-record=pbx.relay.test,8.8.8.8",
    "--host-record=aonly.relay.test,10.0.0.5,::ffff:127.0.0.1",
    "--srv-host=_sip._udp.mixed.relay.test,private.relay.test,5060,10,10",
    "--srv-host=_sip._udp.mixed.relay.test,public.relay.test,5060,20,10",
    "--host-record=private.relay.test,127.0.0.1",
    "--host-record=public.relay.test,8.8.8.8",
]


@pytest.fixture(scope="module")
def dns_server(tmp_path_factory):
    require_dnsmasq()
    server = Dnsmasq(tmp_path_factory.mktemp("dnsmasq"), RECORDS)
    yield server
    server.stop()


def user_agent(dns_server, *, allow_private: bool, transport: str = "udp") -> UserAgent:
    """A user agent (not started: resolution needs no socket) that asks `dns_server`."""
    return UserAgent(
        UaConfig(
            trunk_uri="sip:127.0.0.1:5060",
            transport=transport,
            dns_servers=(("127.0.0.1", dns_server.port),),
            allow_private_targets=allow_private,
        )
    )


@pytest.mark.parametrize(
    ("uri", "transport"),
    [
        ("sip:desk@pbx.relay.test", "udp"),  # its A is public, but its SRV target is loopback
        ("sip:desk@aonly.relay.test", "udp"),
        ("sip:desk@aonly.relay.test", "tcp"),  # its AAAA too (IPv4-mapped loopback)
        ("sip:desk@127.0.0.1:5070", "udp"),
        ("sip:desk@[::ffff:127.0.0.1]", "tcp"),  # over TCP, any address family is reachable
    ],
)
async def test_a_uri_whose_every_target_is_private_is_refused(dns_server, uri, transport):
    ua = user_agent(dns_server, allow_private=False, transport=transport)

    with pytest.raises(TargetRefused, match="private or local address only"):
        await ua.uri_targets(uri)
    assert "resolves to a private or local address" in await ua.uri_problem(uri)


async def test_with_private_addresses_allowed_the_srv_target_is_kept(dns_server):
    ua = user_agent(dns_server, allow_private=True)

    targets = await ua.uri_targets("sip:desk@pbx.relay.test")

    assert targets == [Target("udp", "desk.relay.test", 5070, "127.0.0.1")]
    assert await ua.uri_problem("sip:desk@pbx.relay.test") is None


async def test_only_the_public_srv_target_is_tried(dns_server):
    ua = user_agent(dns_server, allow_private=False)

    targets = await ua.uri_targets("sip:desk@mixed.relay.test")

    assert targets == [Target("udp", "public.relay.test", 5060, "8.8.8.8")]


async def test_a_host_that_does_not_resolve_is_no_refusal_of_a_transfer(dns_server):
    ua = user_agent(dns_server, allow_private=False)

    assert await ua.uri_problem("sip:desk@nothere.relay.test") is None


def test_the_dialogs_requests_go_only_to_the_address_checked(dns_server):
    """The ACK of a 2xx, BYE and NOTIFY go to the route or Contact (RFC 3261 §12.2.1.1): for a
    user's SIP URI, only when that is a public address or the one the INVITE went to."""

    def hop(contact: str, *, allow_private: bool = False) -> tuple[str, int]:
        call = OutboundCall(
            user_agent(dns_server, allow_private=allow_private),
            to="sip:desk@pbx.relay.test",
            caller="+442079460001",
            audio={},
            ring_timeout=5,
            max_seconds=5,
            on_ringing=None,
            on_answered=None,
        )
        call.destination = ("8.8.8.8", 5070)
        call.remote_target = contact
        return call.next_hop()

    assert hop("sip:desk@127.0.0.1:5060") == ("8.8.8.8", 5070)
    assert hop("sip:desk@[::ffff:10.0.0.1]") == ("8.8.8.8", 5070)
    assert hop("sip:desk@rebound.relay.test") == ("8.8.8.8", 5070)  # never resolved again
    assert hop("sip:desk@8.8.4.4:5080") == ("8.8.4.4", 5080)
    assert hop("sip:desk@127.0.0.1:5060", allow_private=True) == ("127.0.0.1", 5060)


# --- calls through the agent ------------------------------------------------------------------
ENTRY = "sip:desk@pbx.relay.test"


class Guarded:
    """An agent (AgentProcess, its trunk SIPp on `trunk_port`) whose DNS (dnsmasq) says
    pbx.relay.test's SIP service is desk.relay.test:`desk_port`, at 127.0.0.1, where a test
    starts the desk's SIPp; private addresses allowed or not (WEBHOOK_ALLOW_PRIVATE)."""

    def __init__(self, workdir, *, allow_private: bool) -> None:
        require_dnsmasq()
        self.workdir, self.desk_port = workdir, free_udp_port()
        self.dns = Dnsmasq(
            workdir / "dns",
            [
                f"--srv-host=_sip._udp.pbx.relay.test,desk.relay.test,{self.desk_port},10,10",
                "--host-record=desk.relay.test,127.0.0.1",
            ],
        )
        self.trunk_port = free_udp_port()
        env = sip_env(
            workdir,
            self.trunk_port,
            INBOUND_RING_SECONDS=1,
            SIP_DNS_SERVERS=self.dns.address,
            WEBHOOK_ALLOW_PRIVATE=str(allow_private).lower(),
        )
        self.address = env["SIP_BIND"]
        self.process = AgentProcess(workdir, env)
        port = int(self.address.rsplit(":", 1)[1])
        wait_until(lambda: udp_port_taken(port), deadline=30, what="the agent")

    def desk(self) -> Sipp:
        """The desk's phone (harness/sipp/forward_target.xml), answering a call to `desk`."""
        return Sipp(
            self.workdir / f"desk-{time.monotonic_ns()}",
            "forward_target",
            port=self.desk_port,
            answering="desk",
            codec="0",
            codec_name="PCMU",
            answer_ms=500,
            actions="",
        )

    def log(self) -> str:
        return self.process.log_path.read_text()

    def stop(self) -> None:
        self.process.stop()
        self.dns.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, django_db_setup):
    agent = Guarded(tmp_path_factory.mktemp("guarded"), allow_private=False)
    yield agent
    agent.stop()


def ring_list_call(agent: Guarded, tmp_path, user, *, greeting_ms: int):
    """A call to a number whose ring list is ENTRY, and the desk's SIPp: (record, desk)."""
    number = ring_group(user, "in_order", {"sip": ENTRY, "ringSeconds": 5})
    desk = agent.desk()
    try:
        caller = call_in(
            agent.address,
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=greeting_ms,
            message_ms=1000,
        )
        assert caller.finish() == 0, caller
        [record] = wait_for_records(number, 1)
        wait_until(lambda: legs_of(record)[0].ended_at, deadline=10, what="the leg's end")
    finally:
        if desk.proc.poll() is None:
            desk.stop()
    return record, desk


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_sip_entry_that_dns_leads_to_loopback_is_skipped_and_voicemail_answers(
    guarded, tmp_path, user
):
    """The ring-time check of the host alone (the system's resolver: relay.test is unknown to
    it) lets the entry through; the agent's own SRV lookup leads to 127.0.0.1, which it does
    not dial: the entry is skipped and logged, and voicemail answers."""
    record, desk = ring_list_call(guarded, tmp_path, user, greeting_ms=1500)

    assert desk.invites() == [], desk  # nothing reached the phone on loopback
    assert (record.status, record.answered_by) == (CallStatus.ANSWERED, AnsweredBy.VOICEMAIL)
    [leg] = legs_of(record)
    assert (leg.sip_uri, leg.answered_at) == (ENTRY, None)
    assert (
        f"{ENTRY} not dialled: its host now resolves to a private or local address only "
        "(127.0.0.1), which WEBHOOK_ALLOW_PRIVATE does not allow"
    ) in guarded.log()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_with_private_addresses_allowed_the_same_entry_is_rung(tmp_path, user):
    agent = Guarded(tmp_path, allow_private=True)
    try:
        record, desk = ring_list_call(agent, tmp_path, user, greeting_ms=0)
    finally:
        agent.stop()

    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, ENTRY)
    assert len(desk.invites()) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_refer_to_a_sip_uri_that_dns_leads_to_loopback_is_refused(guarded, tmp_path, user):
    """The phone bridged through the trunk hands the call on to ENTRY: 403, and the call goes
    on bridged as it was; nothing reaches the desk."""
    number = transfer.forwarding(user)
    phone = transfer.trunk(
        guarded, tmp_path, refer(f"<{ENTRY}>", expect=403, after_ms=500), calls=1
    )
    desk = guarded.desk()
    try:
        caller = call_in(
            guarded.address,
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=0,
            message_ms=2000,
        )
        assert caller.finish() == 0, caller
        assert phone.finish() == 0, phone  # its REFER got 403, then the BYE
    finally:
        if desk.proc.poll() is None:
            desk.stop()

    [record] = wait_for_records(number, 1)
    assert (record.forwarded_to, record.transferred_to) == (transfer.PHONE, None)
    assert desk.invites() == []
    [forbidden] = [m for m in phone.messages.read_text().split("\n") if "SIP/2.0 403" in m]
    assert "pbx.relay.test resolves to a private or local address" in forbidden, forbidden
    assert "transfer refused: pbx.relay.test resolves to a private" in guarded.log()
