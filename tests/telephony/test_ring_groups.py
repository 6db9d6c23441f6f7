"""Ring groups over SIP (issue 57): a number's ring list rung by the agent. SIPp is the caller
and two phones, each its own SIPp reached by a sip: entry of the list (dialled directly, not
through the trunk; harness/sipp/forward_target.xml answers a call to its `answering` user and
lets any other ring until it is CANCELed). With `all` the first phone to answer is bridged and
the other gets CANCEL with RFC 3326's Reason; with `in_order` the first rings its own seconds
and then the second is rung."""

from __future__ import annotations

import re

import pytest

from accounts.models import User
from calls.models import Leg
from harness.live import RelayProcess, wait_until
from harness.sip import Sipp, free_udp_port
from history.models import AnsweredBy, CallStatus
from tests.factories import NumberFactory, NumberMemberFactory
from tests.telephony.conftest import call_in, sip_env, wait_for_records
from virtual_numbers.models import Number
from virtual_numbers.selectors import number_shared_access
from virtual_numbers.services import member_remove

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

REASON = 'Reason: SIP;cause=200;text="Call completed elsewhere"'
MEMBER_PHONE = "+441134960300"
DESK_PHONE = "+441134960301"


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; the phones are on loopback, which the list may name only
    where private addresses are allowed (WEBHOOK_ALLOW_PRIVATE)."""
    workdir = tmp_path_factory.mktemp("ring-groups")
    trunk_port = free_udp_port()
    env = sip_env(workdir, trunk_port, INBOUND_RING_SECONDS=2, WEBHOOK_ALLOW_PRIVATE="true")
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.agent, process.trunk_port = env["SIP_BIND"], trunk_port
    yield process
    process.stop()


def phone(tmp_path, name: str, *, answers: bool, answer_ms: int = 500) -> Sipp:
    """A SIPp phone of its own, its user `name`: it answers a call to `name` if `answers`,
    else rings until it is CANCELed."""
    port = free_udp_port()
    sipp = Sipp(
        tmp_path / name,
        "forward_target",
        port=port,
        answering=name if answers else "nobody-answers",
        codec="0",
        codec_name="PCMU",
        answer_ms=answer_ms,
        actions="",
    )
    sipp.address = f"127.0.0.1:{port}"
    return sipp


def uri(sipp: Sipp, name: str) -> str:
    return f"sip:{name}@{sipp.address}"


def ring_group(user, strategy: str, *entries: dict):
    return NumberFactory(
        owner=user,
        alias="Shop",
        greeting="Hi.",
        ring_entries=list(entries),
        ring_strategy=strategy,
        forward_ring_seconds=10,
    )


def legs_of(record) -> list[Leg]:
    return list(Leg.objects.filter(call_id=record.pk).order_by("created_at", "pk"))


def test_all_rings_both_phones_and_the_one_that_loses_is_cancelled_with_the_reason(
    relay, tmp_path, user
):
    desk = phone(tmp_path, "desk", answers=True, answer_ms=1500)
    till = phone(tmp_path, "till", answers=False)
    number = ring_group(user, "all", {"sip": uri(desk, "desk")}, {"sip": uri(till, "till")})

    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=2000
    )
    assert caller.finish() == 0, caller
    assert desk.finish() == 0, desk
    assert till.finish() == 0, till

    [cancel] = till.received("CANCEL")
    assert REASON in cancel, cancel
    assert desk.received("CANCEL") == []
    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        uri(desk, "desk"),
    )
    legs = legs_of(record)
    assert sorted((leg.sip_uri, leg.ring_entry) for leg in legs) == [
        (uri(desk, "desk"), 0),
        (uri(till, "till"), 1),
    ]
    assert [leg.sip_uri for leg in legs if leg.answered_at] == [uri(desk, "desk")]
    assert all(leg.status == "ended" for leg in legs)


def test_in_order_rings_the_second_phone_after_the_first_ones_own_seconds(relay, tmp_path, user):
    first = phone(tmp_path, "first", answers=False)
    second = phone(tmp_path, "second", answers=True)
    number = ring_group(
        user,
        "in_order",
        {"sip": uri(first, "first"), "ringSeconds": 5},
        {"sip": uri(second, "second"), "ringSeconds": 20},
    )

    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=1000
    )
    assert caller.finish(timeout=60) == 0, caller
    assert first.finish() == 0, first
    assert second.finish() == 0, second

    [cancel] = first.received("CANCEL")  # its seconds ran out: no one answered elsewhere
    assert "Reason:" not in cancel, cancel
    assert len(second.invites()) == 1
    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to) == (CallStatus.ANSWERED, uri(second, "second"))
    rang_first, rang_second = legs_of(record)
    assert (rang_first.sip_uri, rang_second.sip_uri) == (uri(first, "first"), uri(second, "second"))
    waited = (rang_second.created_at - rang_first.created_at).total_seconds()
    assert 5 <= waited < 8, waited
    assert (rang_first.answered_at, rang_second.ring_entry) == (None, 1)


def trunk_phones(relay, tmp_path, *, answering: str, calls: int, answer_ms: int) -> Sipp:
    """SIPp as the trunk: every phone entry's and ring phone's phone."""
    return Sipp(
        tmp_path / "trunk",
        "forward_target",
        port=relay.trunk_port,
        calls=calls,
        answering=re.escape(answering),
        codec="0",
        codec_name="PCMU",
        answer_ms=answer_ms,
        actions="",
    )


def removed(member) -> None:
    access = number_shared_access(user=member.number.owner, number_id=member.number_id)
    member_remove(access=access, member=member)


def test_a_members_entry_rings_their_ring_phone_and_the_record_names_them(relay, tmp_path, user):
    member = NumberMemberFactory(number=NumberFactory(owner=user, alias="Shop", greeting="Hi."))
    User.objects.filter(pk=member.user_id).update(ring_phone=MEMBER_PHONE)
    Number.objects.filter(pk=member.number_id).update(
        ring_entries=[{"member": str(member.user_id)}], forward_ring_seconds=10
    )
    number = member.number
    trunk = trunk_phones(relay, tmp_path, answering=MEMBER_PHONE, calls=1, answer_ms=500)

    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=1000
    )
    assert caller.finish() == 0, caller
    assert trunk.finish() == 0, trunk

    [record] = wait_for_records(number, 1)
    assert (record.forwarded_to, record.ring_entry) == (MEMBER_PHONE, 0)
    assert (record.answered_member_id, record.answered_member_email) == (
        member.user_id,
        member.user.email,
    )
    [leg] = legs_of(record)
    assert (leg.phone, leg.user_id, leg.ring_entry) == (MEMBER_PHONE, member.user_id, 0)


def test_a_member_removed_while_rung_has_their_phones_leg_cancelled(relay, tmp_path, user):
    number = NumberFactory(owner=user, alias="Shop", greeting="Hi.")
    member = NumberMemberFactory(number=number)
    User.objects.filter(pk=member.user_id).update(ring_phone=MEMBER_PHONE)
    Number.objects.filter(pk=number.pk).update(
        ring_entries=[
            {"member": str(member.user_id), "ringSeconds": 30},
            {"phone": DESK_PHONE, "ringSeconds": 30},
        ]
    )
    trunk = trunk_phones(relay, tmp_path, answering=DESK_PHONE, calls=2, answer_ms=6000)

    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=1000
    )
    theirs = wait_until(
        lambda: Leg.objects.filter(phone=MEMBER_PHONE).first(),
        deadline=15,
        what="the member's phone's leg",
    )
    removed(member)
    assert caller.finish() == 0, caller
    assert trunk.finish() == 0, trunk

    # Cancelled for the removal, seconds before the desk answered: no "completed elsewhere".
    cancels = trunk.received("CANCEL")
    assert len(cancels) == 1 and f"sip:{MEMBER_PHONE}@" in cancels[0], cancels
    assert "Reason:" not in cancels[0]
    theirs.refresh_from_db()
    assert (theirs.status, theirs.answered_at) == ("ended", None)
    [record] = wait_for_records(number, 1)
    assert (record.forwarded_to, record.ring_entry, record.answered_member_id) == (
        DESK_PHONE,
        1,
        None,
    )
