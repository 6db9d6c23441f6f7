"""Inbound calls in the call ledger (issue 54): a call to a user's number is a `Call` with
direction `inbound`, moved through the state table from `ringing`, its events numbered, ended
in the state of its outcome in the transaction that writes its history record (named alike);
the parties it was put through to are its `Leg`s, each of a typed target. Inbound calls are
no outbound call's: they are not in the call list, nor counted in its total or in the plan's
quotas, and the outbound recovery leaves them to their agents'."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from calls.models import Call, CallCounter, Leg
from realtime.tasks import calls_recover
from telephony import services
from tests.factories import BlockedCallerFactory, NumberFactory
from tests.records import records_count

pytestmark = pytest.mark.django_db

CALLER = "+447700900123"
TARGET = "+441134960200"


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, forward_targets=[TARGET, "browser"])


def ringing(number, sip_call_id: str = "in-1@test") -> Call:
    return services.inbound_call_open(
        sip_call_id=sip_call_id, number=number, caller_num=CALLER, ringing=True
    )


def events_of(call: Call) -> list[tuple[int, str]]:
    return list(call.events.values_list("seq", "status"))


def test_an_inbound_call_rings_then_is_answered_then_ends_with_numbered_events(number):
    call = ringing(number)
    assert (call.direction, call.status, call.call_id) == ("inbound", "ringing", "")
    assert (call.owner_id, call.number_id, call.caller_id, call.to) == (
        number.owner_id,
        number.pk,
        CALLER,
        number.number,
    )
    assert ringing(number) is None  # the trunk re-sent the INVITE: no second call

    services.inbound_call_answered(call=call)
    record = services.inbound_call_record(call=call, status="answered", duration=12)

    call.refresh_from_db()
    assert (call.status, call.outcome, call.answered_by, call.duration) == (
        "completed",
        "answered",
        "voicemail",
        12,
    )
    assert call.answered_at is not None and call.ended_at is not None
    assert events_of(call) == [(1, "ringing"), (2, "in_progress"), (3, "completed")]
    assert call.last_seq == 3
    assert (record.pk, record.status, record.answered_by) == (call.pk, "answered", "voicemail")
    # Recorded once: a second end (recovery, say) changes nothing.
    assert services.inbound_call_record(call=call, status="missed") is None
    assert records_count() == 1


@pytest.mark.parametrize(
    ("outcome", "state"), [("missed", "no_answer"), ("blocked", "busy")], ids=["missed", "blocked"]
)
def test_an_unanswered_call_ends_in_the_state_of_its_outcome(number, outcome, state):
    if outcome == "blocked":
        BlockedCallerFactory(number=number, caller_num=CALLER)
    call = ringing(number)

    record = services.inbound_call_record(call=call, status=outcome)

    call.refresh_from_db()
    assert (call.status, call.outcome, call.answered_by) == (state, outcome, None)
    assert events_of(call) == [(1, "ringing"), (2, state)]
    assert record.status == outcome


def test_a_caller_blocked_while_the_call_rang_is_recorded_and_kept_blocked(number):
    call = ringing(number)
    BlockedCallerFactory(number=number, caller_num=CALLER)

    record = services.inbound_call_record(call=call, status="missed")

    call.refresh_from_db()
    assert record.status == call.outcome == "blocked"


def test_a_tab_that_takes_the_call_is_a_browser_leg_of_the_owner_never_a_phone(number):
    call = ringing(number)

    services.forward_browser_bridged(call=call)
    record = services.inbound_call_record(call=call, status="answered", duration=5)

    (leg,) = Leg.objects.filter(call=call)
    assert (leg.kind, leg.role, leg.user_id, leg.phone, leg.sip_uri) == (
        "browser",
        "forward_target",
        number.owner_id,
        "",
        "",
    )
    assert (leg.status, leg.duration) == ("ended", 5)
    call.refresh_from_db()
    assert call.answered_by == "browser"
    assert (record.answered_by, record.forwarded_to) == ("forward", "browser")


def test_a_tab_whose_caller_left_as_it_took_the_call_leaves_the_call_unanswered(number):
    call = ringing(number)
    services.forward_browser_bridged(call=call)

    services.forward_browser_unbridged(call=call)
    record = services.inbound_call_record(call=call, status="missed")

    (leg,) = Leg.objects.filter(call=call)
    assert (leg.status, leg.answered_at) == ("ended", None)
    assert (record.status, record.answered_by, record.forwarded_to) == ("missed", None, None)


def test_inbound_calls_are_not_in_the_call_list_its_total_or_the_quotas(number, client_jwt):
    call = ringing(number)
    services.inbound_call_answered(call=call)  # up, and answered

    listed = client_jwt.get("/api/calls").json()
    assert (listed["calls"], listed["total"]) == ([], 0)
    assert not CallCounter.objects.exists()
    quotas = client_jwt.get("/api/user/me").json()["quotas"]
    assert quotas["callsPerDay"]["used"] == 0
    assert quotas["concurrentCalls"]["used"] == 0


def test_an_inbound_call_whose_agent_died_is_its_agents_to_recover_not_the_outbound_ones(
    number, settings
):
    call = ringing(number)
    Call.objects.filter(pk=call.pk).update(step_deadline=timezone.now() - timedelta(minutes=1))

    calls_recover()  # the outbound calls' recovery (the worker's)

    call.refresh_from_db()
    assert (call.status, call.recoveries) == ("ringing", 0)
    assert services.inbound_calls_recover() == 1
    call.refresh_from_db()
    assert (call.status, call.outcome) == ("no_answer", "missed")


def test_a_call_whose_number_was_deleted_goes_with_it_and_its_end_writes_nothing(number):
    from virtual_numbers.services import number_delete

    call = ringing(number)
    leg = services.forward_legs_open(call=call, number=number, sip_call_ids={TARGET: "leg@test"})
    number_delete(number=number)  # its calls, their legs and history go with it

    assert services.inbound_call_record(call=call, status="missed") is None

    assert not Call.objects.filter(pk=call.pk).exists()
    assert not Leg.objects.filter(pk=leg[0].pk).exists()
    assert records_count() == 0
