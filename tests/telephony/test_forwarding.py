"""Forwarding over SIP (issue 28): a call to a number that forwards rings its targets through
the trunk, and the first to take it is bridged to the caller. SIPp is the caller (calling the
agent) and the trunk (each target's phone, tests/telephony/scenarios/forward_target.xml);
what the agent relayed each way is read from its log line of the bridge. What each end
heard, by level and length, is proven against baresip in tests/telephony/interop/."""

from __future__ import annotations

import re
import time

import pytest

from history.models import AnsweredBy, CallStatus
from telephony.models import ForwardLeg, InboundCall
from tests.factories import NumberFactory
from tests.live import RelayProcess, wait_until
from tests.telephony.conftest import (
    SIPP_SHARE,
    Sipp,
    free_udp_port,
    pcap_packets_within,
    sip_env,
    wait_for_records,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

CALLER = "+447700900123"
TARGET = "+441134960200"
OTHER_TARGET = "+441134960201"
PCMA, PCMU = ("8", "PCMA"), ("0", "PCMU")


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; SIPp on `relay.trunk_port` is the trunk a test starts."""
    workdir = tmp_path_factory.mktemp("forwarding")
    trunk_port = free_udp_port()
    env = sip_env(workdir, trunk_port, INBOUND_RING_SECONDS=2)
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.workdir, process.agent, process.trunk_port = workdir, env["SIP_BIND"], trunk_port
    yield process
    process.stop()


def forwarding(user, *targets, ring_seconds=5, screening=False, caller_id="caller"):
    return NumberFactory(
        owner=user,
        alias="Shop",
        greeting="Hi.",
        forward_targets=list(targets),
        forward_ring_seconds=ring_seconds,
        forward_screening=screening,
        forward_caller_id=caller_id,
    )


def phones(relay, tmp_path, *, answering=TARGET, codec=PCMU, answer_ms=300, actions="", calls=1):
    """SIPp as the trunk: the targets' phones (forward_target.xml)."""
    return Sipp(
        tmp_path / "targets",
        "forward_target",
        port=relay.trunk_port,
        calls=calls,
        answering=re.escape(answering),
        codec=codec[0],
        codec_name=codec[1],
        answer_ms=answer_ms,
        actions=actions,
    )


def call_in(relay, tmp_path, scenario: str, number, **fill) -> Sipp:
    return Sipp(
        tmp_path / f"caller-{scenario}",
        scenario,
        port=free_udp_port(),
        remote=relay.agent,
        service=number.number,
        caller=CALLER,
        **fill,
    )


def press(key: str, after_ms: int = 0) -> str:
    """SIPp actions: wait `after_ms`, then press `key` as RFC 4733 events."""
    return (
        f'  <pause milliseconds="{after_ms}"/>\n'
        f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/dtmf_2833_{key}.pcap"/>'
        "</action></nop>"
    )


def bridge_line(relay, call_id: str) -> tuple[int, int, int]:
    """The agent's log line of the call's bridge: (seconds, packets relayed to the target,
    packets relayed to the caller)."""
    pattern = re.compile(
        rf"inbound call {re.escape(call_id)}: bridged (\d+) s; relayed (\d+) packets to the "
        r"target, (\d+) to the caller"
    )

    def found():
        return pattern.search(relay.log_path.read_text())

    match = wait_until(found, deadline=10, what="the bridge's log line")
    return tuple(int(g) for g in match.groups())


def legs_of(record) -> list[ForwardLeg]:
    return list(ForwardLeg.objects.filter(call__sip_call_id=record.sip_call_id).order_by("pk"))


@pytest.mark.parametrize("codec", [PCMU, PCMA], ids=["pcma-to-pcmu", "pcma-to-pcma"])
def test_the_target_that_answers_is_bridged_both_ways_until_the_caller_hangs_up(
    relay, tmp_path, user, codec
):
    number = forwarding(user, TARGET)
    # The target sends the same recording back (its codec: PCMA in the capture, re-typed or
    # transcoded by the agent for the caller) while the caller talks.
    targets = phones(
        relay,
        tmp_path,
        codec=codec,
        answer_ms=1000,
        actions=f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/g711a.pcap"/></action></nop>',
    )
    started = time.monotonic()
    caller = call_in(relay, tmp_path, "inbound_message", number, greeting_ms=0, message_ms=4000)
    assert caller.finish() == 0, caller
    assert targets.finish() == 0, targets

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        TARGET,
    )
    assert 3 <= record.duration <= 6, record.duration
    seconds, to_target, to_caller = bridge_line(relay, record.sip_call_id)
    assert seconds == record.duration
    # Each end played the capture from its answer, and the bridge relayed what they sent
    # while it lasted, each way: about the packets of the capture's first 4 s (the caller
    # hangs up then), never more than the whole capture.
    least = pcap_packets_within(SIPP_SHARE / "g711a.pcap", 3.5)
    most = pcap_packets_within(SIPP_SHARE / "g711a.pcap", 60)
    assert least <= to_target <= most and least <= to_caller <= most, (to_target, to_caller)
    # The caller was answered only once the target was (a second after its INVITE): answer
    # on bridge.
    ledger = InboundCall.objects.get(sip_call_id=record.sip_call_id)
    assert (ledger.answered_at - ledger.started_at).total_seconds() >= 1.0, ledger
    [invite] = targets.received("INVITE")
    assert re.search(rf"^From: <sip:{re.escape(CALLER)}@", invite, re.MULTILINE), invite
    assert re.search(
        rf"^Diversion: <sip:{re.escape(number.number)}@[^>]+>;reason=unconditional;counter=1",
        invite,
        re.MULTILINE,
    ), invite
    assert targets.received("BYE"), targets  # the agent hung the target up after the caller
    [leg] = legs_of(record)
    assert (leg.target, leg.answered_at is not None, leg.ended_at is not None) == (
        TARGET,
        True,
        True,
    )
    assert time.monotonic() - started < 30
