"""Forwarding between two real phones (issue 28): baresip calls a number through Kamailio,
Relay rings the owner's phone (baresip too) through the same carrier edge, answering its
digest challenge, and bridges the two once it answers. Each end hears the other's words,
checked by length and level with sox, and a key the caller presses reaches the owner's
phone. Over UDP, over TCP, and over TLS with SRTP on both legs (the `transport` fixture)."""

from __future__ import annotations

import pytest

from calls.models import Leg
from harness.kamailio import CALLEE
from harness.speech import sox_level, speech_wav
from tests.factories import NumberFactory
from tests.records import records_where
from tests.telephony.conftest import bridge_log, wait_for_records
from tests.telephony.interop.conftest import CALLER, expected_sdp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

CALLER_WORDS = "Hello, it is me. I am calling about the delivery of the parcel tomorrow."
OWNER_WORDS = "Hi, this is the shop. Yes, the parcel comes in the morning."


def test_the_owners_phone_takes_the_call_and_each_end_hears_the_other(
    relay, kamailio, phones, user, tmp_path, transport
):
    assert_bridged_both_ways(relay, kamailio, phones, user, tmp_path, transport)


@pytest.mark.parametrize("transport", ["udp"], indirect=True)
def test_an_owner_whose_phone_speaks_only_pcma_hears_a_pcmu_caller_and_is_heard(
    relay, kamailio, phones, user, tmp_path, transport
):
    # The caller's PCMU (its first choice) and the owner's PCMA: Relay transcodes both ways.
    assert_bridged_both_ways(relay, kamailio, phones, user, tmp_path, transport, owner="PCMA")
    [record] = records_where()
    found = bridge_log(relay.log_path.read_text(), record.sip_call_id)
    assert found and found.group(2, 3) == ("PCMU", "PCMA"), found


def assert_bridged_both_ways(relay, kamailio, phones, user, tmp_path, transport, owner=None):
    number = NumberFactory(owner=user, alias="Shop", forward_targets=[CALLEE])
    # The owner speaks at once and then listens; the caller speaks, and hangs up when done
    # (baresip hangs up when its WAV runs out).
    owner_source = speech_wav(tmp_path / "owner.wav", OWNER_WORDS, before=0.3, after=30)
    caller_source = speech_wav(tmp_path / "caller.wav", CALLER_WORDS, before=0.5, after=1.0)
    call_seconds = sox_level(caller_source).seconds
    owner = phones(
        "callee", number=CALLEE, source=owner_source, answer=True, codecs=owner or "PCMU,PCMA"
    )
    caller = phones("caller", number=CALLER, source=caller_source)

    caller.dial(number.number, kamailio)
    caller.wait_event("CALL_ESTABLISHED", deadline=20)
    # A key the caller presses reaches the owner's phone as a key (RFC 4733, relayed).
    caller.command("sndcode", "5")
    pressed = owner.wait_event("CALL_DTMF_START", deadline=10)
    assert pressed.param == "5", pressed.raw
    caller.wait_event("CALL_CLOSED", deadline=call_seconds + 20)
    owner.wait_event("CALL_CLOSED", deadline=10)  # Relay hung the owner up after the caller

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        "answered",
        "forward",
        CALLEE,
    )
    assert abs(record.duration - call_seconds) <= 2, (record.duration, call_seconds)
    # The owner heard the caller's words, for as long as the caller talked...
    heard_by_owner = sox_level(owner.heard())
    assert abs(heard_by_owner.seconds - call_seconds) <= 1.5, (heard_by_owner, call_seconds)
    assert heard_by_owner.rms > 0.02 and heard_by_owner.maximum > 0.2, heard_by_owner
    # ...and the caller the owner's.
    heard_by_caller = sox_level(caller.heard())
    assert abs(heard_by_caller.seconds - call_seconds) <= 1.5, (heard_by_caller, call_seconds)
    assert heard_by_caller.rms > 0.02 and heard_by_caller.maximum > 0.2, heard_by_caller
    # Both legs went through the carrier edge over the test's transport, with its media
    # (SRTP over TLS), and Relay answered the edge's challenge to dial the owner.
    leg_ids = list(Leg.objects.filter(call_id=record.pk).values_list("sip_call_id", flat=True))
    for call_id in [record.sip_call_id, *leg_ids]:
        invites = [
            line for line in kamailio.lines(call_id) if line.startswith("interop: request INVITE ")
        ]
        assert invites, kamailio.trace
        assert all(kamailio.sdp(line) == expected_sdp(transport) for line in invites), (
            kamailio.trace
        )
        assert all(f" proto={transport}" in line for line in invites), kamailio.trace
    [leg_id] = leg_ids
    assert any(
        line.startswith("interop: authenticated INVITE") for line in kamailio.lines(leg_id)
    ), kamailio.trace
    assert kamailio.routed(leg_id, "BYE"), kamailio.trace  # Relay's BYE, by the route set
