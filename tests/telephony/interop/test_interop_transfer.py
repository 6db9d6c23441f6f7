"""Blind transfer between real phones (issue 58): baresip calls a number through Kamailio,
Relay rings the owner's phone (baresip too) through the same carrier edge, and the owner's
phone transfers the call with its own REFER (baresip's `transfer` command), which reaches
Relay through Kamailio's route set. Relay dials the transfer's target through the edge (it
reaches the same baresip, which answers as TARGET too, an account of its own: one phone plays
the transferor and the target), tells the phone how it goes in NOTIFYs and hangs its first leg
up; the caller then hears the target's words. Over UDP only: the REFER path is the same on
every transport."""

from __future__ import annotations

import re

import pytest

from calls.models import Leg, LegRole
from harness.kamailio import CALLEE
from harness.live import wait_until
from harness.speech import sox_level, speech_wav
from tests.factories import NumberFactory
from tests.telephony.conftest import wait_for_records
from tests.telephony.interop.conftest import CALLER

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TARGET = "+441134960300"  # in the callee range Kamailio sends to the callee's port
OWNER_WORDS = "Hi, this is the shop. Let me put you through to the warehouse."


@pytest.mark.parametrize("transport", ["udp"], indirect=True)
def test_the_owners_phone_transfers_with_its_own_refer_and_the_caller_hears_the_target(
    relay, kamailio, phones, user, tmp_path, transport
):
    number = NumberFactory(owner=user, alias="Shop", forward_targets=[CALLEE])
    owner_source = speech_wav(tmp_path / "owner.wav", OWNER_WORDS, before=0.3, after=30)
    caller_source = speech_wav(tmp_path / "caller.wav", "Hello.", before=0.5, after=14)
    owner = phones("callee", number=CALLEE, source=owner_source, answer=True, also=(TARGET,))
    caller = phones("caller", number=CALLER, source=caller_source)

    caller.dial(number.number, kamailio)
    caller.wait_event("CALL_ESTABLISHED", deadline=20)
    owner.wait_event("CALL_ESTABLISHED", deadline=10)
    owner.command("transfer", f"sip:{TARGET}@127.0.0.1:{kamailio.port}")
    caller.wait_event("CALL_CLOSED", deadline=40)  # its WAV ran out: it hung up

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        "answered",
        CALLEE,
        TARGET,
    )
    legs = {leg.role: leg for leg in Leg.objects.filter(call_id=record.pk).order_by("created_at")}
    assert legs[LegRole.TRANSFER_TARGET].answered_at is not None, legs
    log = relay.log_path.read_text()
    assert re.search(r"REFER taken: a transfer", log), log[-3000:]
    # The caller heard the target after the transfer: the new bridge relayed its words.
    match = wait_until(
        lambda: re.search(
            rf"inbound call {re.escape(record.sip_call_id)}, transferred: bridged (\d+) s .*"
            r"relayed (\d+) packets to the target, (\d+) to the caller",
            relay.log_path.read_text(),
        ),
        deadline=10,
        what="the transfer's bridge log line",
    )
    assert int(match[1]) >= 3 and int(match[3]) >= 150, match[0]
    heard = sox_level(caller.heard())
    assert heard.rms > 0.01 and heard.maximum > 0.2, heard
    # The REFER and the NOTIFYs went through the carrier edge, in the phone's dialog.
    edge_log = kamailio.log_path.read_text()
    assert re.search(r"interop: (request|routed) REFER ", edge_log), edge_log[-3000:]
    assert re.search(r"interop: (request|routed) NOTIFY ", edge_log), edge_log[-3000:]
