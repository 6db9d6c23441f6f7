"""Forwarding over SIP (issue 28): a call to a number that forwards rings its targets through
the trunk, and the first to take it is bridged to the caller. SIPp is the caller (calling the
agent) and the trunk (each target's phone, harness/sipp/forward_target.xml);
what the agent relayed each way is read from its log line of the bridge. What each end
heard, by level and length, is proven against baresip in tests/telephony/interop/."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings

from calls.models import Call, Leg
from harness.live import wait_until
from harness.sip import SIPP_SHARE, Sipp, pcap_packets_within, presses
from history.models import AnsweredBy, CallStatus
from telephony.speech import Speech
from tests.factories import NumberFactory
from tests.telephony.conftest import (
    CALLER,
    agent_relay,
    bridge_log,
    call_in,
    wait_for_records,
)
from virtual_numbers.models import OpeningHours

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TARGET = "+441134960200"
OTHER_TARGET = "+441134960201"
PCMA, PCMU = ("8", "PCMA"), ("0", "PCMU")


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; SIPp on `relay.trunk_port` is the trunk a test starts."""
    process = agent_relay(tmp_path_factory.mktemp("forwarding"))
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


def bridge_line(relay, call_id: str) -> tuple[int, str, str, int, int]:
    """The agent's log line of the call's bridge: (seconds, the caller's codec, the target's,
    packets relayed to the target, packets relayed to the caller)."""
    match = wait_until(
        lambda: bridge_log(relay.log_path.read_text(), call_id),
        deadline=10,
        what="the bridge's log line",
    )
    seconds, caller, target, to_target, to_caller = match.groups()
    return int(seconds), caller, target, int(to_target), int(to_caller)


def legs_of(record) -> list[Leg]:
    return list(Leg.objects.filter(call_id=record.pk).order_by("pk"))


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
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=4000
    )
    assert caller.finish() == 0, caller
    assert targets.finish() == 0, targets

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        TARGET,
    )
    assert 3 <= record.duration <= 6, record.duration
    seconds, caller_codec, target_codec, to_target, to_caller = bridge_line(
        relay, record.sip_call_id
    )
    assert seconds == record.duration
    assert (caller_codec, target_codec) == ("PCMA", codec[1])
    # Each end played the capture from its answer, and the bridge relayed what they sent
    # while it lasted, each way: about the packets of the capture's first 4 s (the caller
    # hangs up then), never more than the whole capture.
    least = pcap_packets_within(SIPP_SHARE / "g711a.pcap", 3.5)
    most = pcap_packets_within(SIPP_SHARE / "g711a.pcap", 60)
    assert least <= to_target <= most and least <= to_caller <= most, (to_target, to_caller)
    # The caller was answered only once the target was (a second after its INVITE): answer
    # on bridge.
    ledger = Call.objects.get(pk=record.pk)
    assert (ledger.answered_at - ledger.created_at).total_seconds() >= 1.0, ledger
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


def test_the_target_hanging_up_ends_the_callers_call(relay, tmp_path, user):
    number = forwarding(user, TARGET)
    target = Sipp(tmp_path / "target", "answer_then_bye", port=relay.trunk_port, hangup_ms=2000)
    caller = call_in(relay.agent, tmp_path, "inbound_wait_bye", number.number)
    assert target.finish() == 0, target
    assert caller.finish() == 0, caller  # the agent's BYE came to the caller

    [record] = wait_for_records(number, 1)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, TARGET)
    assert 1 <= record.duration <= 3, record.duration
    [leg] = legs_of(record)
    assert leg.ended_at is not None and leg.duration is not None


def voicemail_caller(relay, tmp_path, number) -> Sipp:
    """A caller who, once answered, waits out the greeting ("Hi.") and the beep, and leaves
    SIPp's capture as a message."""
    return call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=1500, message_ms=3000
    )


def assert_voicemail_took_it(number) -> None:
    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.VOICEMAIL,
        None,
    )
    assert record.recording, "voicemail recorded nothing"
    assert all(leg.answered_at is None and leg.ended_at is not None for leg in legs_of(record))


def test_a_target_that_does_not_answer_in_ring_seconds_is_cancelled_then_voicemail_answers(
    relay, tmp_path, user
):
    number = forwarding(user, TARGET, ring_seconds=5)
    targets = phones(relay, tmp_path, answering="nobody")
    started = time.monotonic()
    caller = voicemail_caller(relay, tmp_path, number)
    assert targets.finish() == 0, targets  # rang, and was CANCELed (487, ACK)
    assert 5 <= time.monotonic() - started <= 12
    assert caller.finish() == 0, caller
    assert_voicemail_took_it(number)
    assert len(targets.received("CANCEL")) >= 1


def test_a_busy_target_sends_the_call_to_voicemail_at_once(relay, tmp_path, user):
    number = forwarding(user, TARGET, ring_seconds=30)
    target = Sipp(
        tmp_path / "target", "reject", port=relay.trunk_port, status=486, phrase="Busy Here"
    )
    started = time.monotonic()
    caller = voicemail_caller(relay, tmp_path, number)
    assert target.finish() == 0, target
    assert caller.finish() == 0, caller
    assert time.monotonic() - started < 20  # not the 30 s of ringing
    assert_voicemail_took_it(number)


def test_a_closed_number_goes_straight_to_voicemail_and_rings_no_target(relay, tmp_path, user):
    # Issue 57: closed on the day before, of and after today in its zone, so that the agent's
    # clock finds it closed whenever the test runs; voicemail answers without the 30 s ring.
    number = forwarding(user, TARGET, ring_seconds=30)
    today = datetime.now(ZoneInfo("Europe/London")).date()
    OpeningHours.objects.create(
        number=number,
        time_zone="Europe/London",
        weekly=[
            {
                "days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                "start": "00:00",
                "end": "24:00",
            }
        ],
        closed_dates=[str(today + timedelta(days=days)) for days in (-1, 0, 1)],
        closed_greeting="We are closed for the test.",
    )
    targets = phones(relay, tmp_path)  # would answer, were it rung
    started = time.monotonic()
    caller = voicemail_caller(relay, tmp_path, number)

    assert caller.finish() == 0, caller
    assert time.monotonic() - started < 20
    assert_voicemail_took_it(number)
    targets.stop()
    assert targets.received("INVITE") == []
    [record] = wait_for_records(number, 1)
    assert legs_of(record) == []
    assert re.search(
        rf"inbound call {re.escape(record.sip_call_id)}: closed now, voicemail answers",
        relay.log_path.read_text(),
    )
    # The closed greeting was spoken: the agent's speech cache holds it.
    spoken = Speech(relay.workdir / "tts").key(
        "We are closed for the test.", settings.TTS_DEFAULT_LANGUAGE
    )
    assert (relay.workdir / "tts" / f"{spoken}.8").exists()


def test_of_two_targets_the_one_that_answers_is_bridged_and_the_other_cancelled(
    relay, tmp_path, user
):
    number = forwarding(user, OTHER_TARGET, TARGET, ring_seconds=20)
    targets = phones(relay, tmp_path, answering=TARGET, answer_ms=1500, calls=2)
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=2000
    )
    assert caller.finish() == 0, caller
    assert targets.finish() == 0, targets  # one answered and was hung up, one CANCELed

    [record] = wait_for_records(number, 1)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, TARGET)
    assert len(targets.invites()) == 2
    [cancel] = targets.received("CANCEL")
    assert f"CANCEL sip:{OTHER_TARGET}@" in cancel
    legs = {leg.target: leg for leg in legs_of(record)}
    assert legs[TARGET].answered_at is not None and legs[OTHER_TARGET].answered_at is None


def test_with_screening_the_target_that_presses_1_is_bridged(relay, tmp_path, user):
    number = forwarding(user, TARGET, screening=True, caller_id="number")
    targets = phones(relay, tmp_path, actions=presses("1", after_ms=1000))
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=2000
    )
    assert caller.finish(timeout=40) == 0, caller
    assert targets.finish() == 0, targets

    [record] = wait_for_records(number, 1)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, TARGET)
    [invite] = targets.received("INVITE")
    # callerId "number": the target sees the virtual number, and no Diversion.
    assert re.search(rf"^From: <sip:{re.escape(number.number)}@", invite, re.MULTILINE), invite
    assert "Diversion:" not in invite


@pytest.mark.parametrize(
    "actions", [presses("2", after_ms=1000), ""], ids=["another-key", "silence"]
)
def test_with_screening_another_key_or_silence_hangs_the_target_up_and_voicemail_answers(
    relay, tmp_path, user, actions
):
    number = forwarding(user, TARGET, screening=True)
    targets = phones(relay, tmp_path, actions=actions)
    caller = voicemail_caller(relay, tmp_path, number)
    assert targets.finish(timeout=40) == 0, targets  # the agent's BYE ended the target's call
    assert caller.finish(timeout=40) == 0, caller
    assert_voicemail_took_it(number)


def test_a_caller_who_hangs_up_while_the_targets_ring_is_missed_and_every_leg_cancelled(
    relay, tmp_path, user
):
    number = forwarding(user, TARGET, OTHER_TARGET, ring_seconds=30)
    targets = phones(relay, tmp_path, answering="nobody", calls=2)
    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_cancel",
        number.number,
        resend='  <pause milliseconds="1500"/>',
    )
    assert caller.finish() == 0, caller
    assert targets.finish() == 0, targets  # each of the two got CANCEL at once

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == (CallStatus.MISSED, None)
    assert len(targets.received("CANCEL")) == 2
    assert all(leg.ended_at is not None for leg in legs_of(record))


def test_targets_the_dialing_policy_refuses_now_or_past_the_quota_are_never_dialled(
    relay, tmp_path, user
):
    # Set before the policy refused France (as the API would refuse it now), and a user whose
    # plan allows one call a day: of three targets only TARGET is dialled.
    user.calls_per_day = 1
    user.save(update_fields=["calls_per_day"])
    number = forwarding(user, "+33123456789", TARGET, OTHER_TARGET)
    targets = phones(relay, tmp_path)
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=1500
    )
    assert caller.finish() == 0, caller
    assert targets.finish() == 0, targets

    [record] = wait_for_records(number, 1)
    assert record.forwarded_to == TARGET
    invites = targets.received("INVITE")
    assert [re.search(r"^INVITE (\S+)", i, re.MULTILINE).group(1) for i in invites] == [
        f"sip:{TARGET}@127.0.0.1:{relay.trunk_port}"
    ]
    assert [leg.target for leg in legs_of(record)] == [TARGET]
