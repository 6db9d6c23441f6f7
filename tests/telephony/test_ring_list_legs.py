"""A ring list's part of the ledger (issue 57), through the telephony services: the list as it
rings now (an entry whose member left skipped and logged, a member's ring phone), SIP URI legs
written once with their entry, a private SIP host skipped at ring time, and the places a call
holds in the agent."""

from __future__ import annotations

import logging

import pytest

from accounts.models import User
from calls.models import Leg
from telephony import services
from telephony.inbound.forwarding import ring_places
from tests.factories import NumberFactory, NumberMemberFactory
from virtual_numbers.selectors import number_shared_access
from virtual_numbers.services import member_remove

pytestmark = pytest.mark.django_db

DESK = "sip:desk@pbx.example.com"


def ringing(number):
    return services.inbound_call_open(
        sip_call_id="call-1@test", number=number, caller_num="+447700900123", ringing=True
    )


def test_the_list_rings_as_it_is_now_skipping_a_member_who_left(user, caplog):
    number = NumberFactory(owner=user, forward_ring_seconds=25)
    stays, leaves = NumberMemberFactory(number=number), NumberMemberFactory(number=number)
    User.objects.filter(pk=stays.user_id).update(ring_phone="+441134960300")
    number.ring_entries = [
        {"member": str(leaves.user_id)},
        {"phone": "+441134960200", "ringSeconds": 10},
        {"member": str(stays.user_id)},
        {"sip": DESK},
    ]
    number.save(update_fields=["ring_entries"])
    member_remove(access=number_shared_access(user=user, number_id=number.pk), member=leaves)

    with caplog.at_level(logging.INFO, logger="telephony.services"):
        now = services.ring_list_now(number=number, label="inbound call x")

    assert [(e.entry, e.kind, e.target, e.seconds, e.ring_phone) for e in now] == [
        (1, "phone", "+441134960200", 10, ""),
        (2, "member", str(stays.user_id), 25, "+441134960300"),
        (3, "sip", DESK, 25, ""),
    ]
    assert f"ring list entry 0 skipped: user {leaves.user_id}" in caplog.text


def test_a_sip_uri_leg_is_written_once_with_its_entry(settings, user):
    number = NumberFactory(owner=user, ring_entries=[{"sip": DESK}])
    call = ringing(number)
    ids = {DESK: "leg-desk@test"}

    [leg] = services.forward_legs_open(
        call=call, number=number, sip_call_ids=ids, entries={DESK: (0, None)}
    )

    assert (leg.kind, leg.phone, leg.sip_uri, leg.ring_entry, leg.user_id) == (
        "sip",
        "",
        DESK,
        0,
        None,
    )
    assert services.forward_legs_open(call=call, number=number, sip_call_ids=ids) == []
    assert Leg.objects.count() == 1


def test_a_sip_uri_that_leads_to_a_private_address_is_skipped_at_ring_time(settings, user):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    private = "sip:desk@127.0.0.1:5070"
    number = NumberFactory(owner=user, ring_entries=[{"sip": private}])

    legs = services.forward_legs_open(
        call=ringing(number), number=number, sip_call_ids={private: "leg@test"}
    )

    assert legs == []
    assert not Leg.objects.exists()


def test_a_members_ring_phone_leg_names_them(user):
    member = NumberMemberFactory(number=NumberFactory(owner=user))
    number = member.number
    phone = "+441134960300"

    [leg] = services.forward_legs_open(
        call=ringing(number),
        number=number,
        sip_call_ids={phone: "leg@test"},
        entries={phone: (4, member.user_id)},
    )

    assert (leg.phone, leg.user_id, leg.ring_entry) == (phone, member.user_id, 4)


@pytest.mark.parametrize(
    ("strategy", "entries", "places"),
    [
        ("all", [], 0),
        ("all", [{"phone": "+441134960200"}, {"member": "x"}, {"sip": DESK}], 4),
        ("in_order", [{"phone": "+441134960200"}, {"member": "x"}, {"sip": DESK}], 2),
        ("in_order", [{"phone": "+441134960200"}, {"sip": DESK}], 1),
    ],
)
def test_a_call_holds_the_places_its_list_may_ring_at_once(user, strategy, entries, places):
    number = NumberFactory.build(owner=user, ring_entries=entries, ring_strategy=strategy)

    assert ring_places(number) == places
