"""The ledger of forwarded calls (issue 28), through the telephony services and the API: a
target is dialled at most once per call, every leg counts in its owner's plan quotas while it
is up and for the day, and a call recorded by recovery after its agent died mid-bridge is
answered by the target it was bridged to."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from calls.models import Call, Leg
from history.models import AnsweredBy, CallStatus
from telephony import services
from tests.factories import InventoryNumberFactory, NumberFactory
from tests.records import records_where

pytestmark = pytest.mark.django_db

CALLER = "+447700900123"
TARGETS = ["+441134960200", "+441134960201"]


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, forward_targets=list(TARGETS))


def ringing(number, call_id: str = "call-1@test") -> Call:
    return services.inbound_call_open(
        sip_call_id=call_id, number=number, caller_num=CALLER, ringing=True
    )


def sip_call_ids(*targets: str) -> dict[str, str]:
    return {target: f"leg-{target}@test" for target in targets}


def test_each_target_gets_one_leg_written_before_it_is_dialled_and_never_a_second(number):
    call = ringing(number)
    legs = services.forward_legs_open(call=call, number=number, sip_call_ids=sip_call_ids(*TARGETS))
    assert [(leg.target, leg.sip_call_id) for leg in legs] == [
        (t, f"leg-{t}@test") for t in TARGETS
    ]
    assert all(leg.owner_id == number.owner_id and leg.ended_at is None for leg in legs)
    assert all(
        (leg.kind, leg.role, leg.status) == ("sip", "forward_target", "ringing") for leg in legs
    )
    # The agent asks again (a restart, a retry): nothing more is dialled.
    assert (
        services.forward_legs_open(call=call, number=number, sip_call_ids=sip_call_ids(*TARGETS))
        == []
    )
    assert Leg.objects.count() == 2


def test_a_target_refused_now_or_a_number_of_the_inventory_is_skipped(user):
    InventoryNumberFactory(e164=TARGETS[1])
    number = NumberFactory(owner=user, forward_targets=["+33123456789", *TARGETS])
    call = ringing(number)
    targets = sip_call_ids("+33123456789", *TARGETS)
    legs = services.forward_legs_open(call=call, number=number, sip_call_ids=targets)
    assert [leg.target for leg in legs] == [TARGETS[0]]


@pytest.mark.parametrize("quota", ["calls_per_day", "concurrent_calls"])
def test_legs_stop_at_the_owners_quota(user, number, quota):
    setattr(user, quota, 1)
    user.save(update_fields=[quota])
    legs = services.forward_legs_open(
        call=ringing(number), number=number, sip_call_ids=sip_call_ids(*TARGETS)
    )
    assert [leg.target for leg in legs] == [TARGETS[0]]


def test_legs_count_in_the_owners_quotas_and_end_with_their_call(number, client_jwt):
    call = ringing(number)
    [first, second] = services.forward_legs_open(
        call=call, number=number, sip_call_ids=sip_call_ids(*TARGETS)
    )
    quotas = client_jwt.get("/api/user/me").json()["quotas"]
    assert quotas["callsPerDay"]["used"] == 2
    assert quotas["concurrentCalls"]["used"] == 2

    assert services.forward_leg_bridged(call=call, leg=first) > 0  # the seconds it may talk
    services.leg_ended(leg=second)
    record = services.inbound_call_record(call=call, status=CallStatus.ANSWERED, duration=42)

    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, TARGETS[0])
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.duration, second.duration) == (42, 0)
    assert (first.status, second.status) == ("ended", "ended")
    call.refresh_from_db()
    assert (call.status, call.outcome, call.answered_by) == ("completed", "answered", "person")
    assert list(call.events.values_list("seq", "status")) == [
        (1, "ringing"),
        (2, "in_progress"),
        (3, "completed"),
    ]
    quotas = client_jwt.get("/api/user/me").json()["quotas"]
    assert quotas["callsPerDay"]["used"] == 2  # still today's
    assert quotas["concurrentCalls"]["used"] == 0
    assert quotas["callSecondsPerDay"]["used"] == 42


def test_a_bridge_is_granted_what_is_left_of_the_answered_seconds(user, number):
    user.call_seconds_per_day = 30
    user.save(update_fields=["call_seconds_per_day"])
    # Two calls ring at once, each with a leg dialled while seconds were left.
    calls = [ringing(number, f"call-{n}@test") for n in (1, 2)]
    legs = [
        services.forward_legs_open(call=call, number=number, sip_call_ids=sip_call_ids(TARGETS[0]))[
            0
        ]
        for call in calls
    ]
    assert services.forward_leg_bridged(call=calls[0], leg=legs[0]) == 30
    # The first bridge holds all 30 s while it talks: nothing is left for the second.
    assert services.forward_leg_bridged(call=calls[1], leg=legs[1]) == 0
    calls[1].refresh_from_db()
    legs[1].refresh_from_db()
    assert (calls[1].status, calls[1].answered_at, calls[1].answered_by) == ("ringing", None, None)
    assert (legs[1].status, legs[1].answered_at) == ("ringing", None)


def test_a_call_whose_agent_died_mid_bridge_is_recorded_forwarded_once(number, settings):
    call = ringing(number)
    [first, _] = services.forward_legs_open(
        call=call, number=number, sip_call_ids=sip_call_ids(*TARGETS)
    )
    services.forward_leg_bridged(call=call, leg=first)
    # The agent's last heartbeat was 20 s after the bridge; then it died.
    grace = timedelta(seconds=settings.CALL_RECOVERY_GRACE)
    answered = timezone.now() - timedelta(minutes=5)
    Call.objects.filter(pk=call.pk).update(
        answered_at=answered, step_deadline=answered + timedelta(seconds=20) + grace
    )

    assert services.inbound_calls_recover() == 1
    assert services.inbound_calls_recover() == 0

    [record] = records_where(number=number)
    assert (record.status, record.duration) == (CallStatus.ANSWERED, 20)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, TARGETS[0])
    assert not Leg.objects.filter(ended_at__isnull=True).exists()
    call.refresh_from_db()
    assert (call.status, call.outcome, call.duration) == ("completed", "answered", 20)
    assert record.pk == call.pk  # the record and the ledger name the call alike


def test_a_bridge_the_caller_left_before_its_answer_is_undone(number):
    call = ringing(number)
    [first, _] = services.forward_legs_open(
        call=call, number=number, sip_call_ids=sip_call_ids(*TARGETS)
    )
    services.forward_leg_bridged(call=call, leg=first)

    services.forward_leg_unbridged(call=call, leg=first)
    record = services.inbound_call_record(call=call, status=CallStatus.MISSED)

    assert (record.status, record.answered_by, record.forwarded_to) == ("missed", None, None)
    first.refresh_from_db()
    assert (first.status, first.answered_at, first.duration) == ("ended", None, 0)
    call.refresh_from_db()
    assert (call.answered_at, call.answered_by) == (None, None)
    assert (call.status, call.outcome) == ("no_answer", "missed")


def test_a_script_dials_a_target_once_per_dial_and_its_legs_are_rows_of_its_call(user):
    from tests.factories import CallFactory

    call = CallFactory(owner=user, status="in_progress")
    ids = sip_call_ids(*TARGETS)

    first = services.dial_legs_open(
        owner_id=user.pk, targets=TARGETS, sip_call_ids=ids, call=call, dial=1
    )
    for leg in first:  # the dial is over: the owner's plan has room for calls again
        services.leg_ended(leg=leg)
    again = services.dial_legs_open(
        owner_id=user.pk, targets=TARGETS, sip_call_ids=ids, call=call, dial=1
    )
    second_dial = services.dial_legs_open(
        owner_id=user.pk, targets=TARGETS[:1], sip_call_ids=ids, call=call, dial=2
    )

    assert [leg.target for leg in first] == TARGETS
    assert again == []  # the same dial asked again: nothing is rung twice
    assert [(leg.target, leg.dial) for leg in second_dial] == [(TARGETS[0], 2)]
    assert Leg.objects.filter(call=call, role="dial_target").count() == 3


def test_the_legs_of_an_outbound_call_that_ended_without_its_agent_are_ended(user):
    from tests.factories import CallFactory

    live = CallFactory(owner=user, status="in_progress")
    lost = CallFactory(owner=user, status="failed")
    (up,) = services.dial_legs_open(
        owner_id=user.pk,
        targets=TARGETS[:1],
        sip_call_ids=sip_call_ids(*TARGETS),
        call=live,
        dial=1,
    )
    (orphan,) = services.dial_legs_open(
        owner_id=user.pk,
        targets=TARGETS[:1],
        sip_call_ids=sip_call_ids(*TARGETS),
        call=lost,
        dial=1,
    )
    services.dial_leg_bridged(leg=orphan)

    assert services.dial_legs_settle() == 1

    orphan.refresh_from_db()
    up.refresh_from_db()
    assert orphan.ended_at is not None and up.ended_at is None
    # It no longer holds a place among the owner's calls at once: the live call and its leg do.
    from accounts.quotas import uses_of

    assert uses_of({user.pk}, now=timezone.now())[user.pk]["up"] == 2
