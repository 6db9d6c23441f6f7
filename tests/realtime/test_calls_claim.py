"""An agent's claim of due calls (realtime.services.calls_claim): an agent with room asks
every SIP_POLL_INTERVAL, and nearly always finds nothing queued, which one compiled
statement answers; queued calls are claimed oldest first, up to the agent's room, each
moved to dialing with its SIP Call-ID."""

from datetime import timedelta

import pytest
from django.utils import timezone

from calls.models import Call
from calls.states import CallState
from realtime.services import calls_claim
from tests.factories import CallFactory

pytestmark = pytest.mark.django_db


def claim(limit: int) -> list[Call]:
    ids = iter(range(1000))
    return calls_claim(limit=limit, sip_call_id=lambda: f"sip-{next(ids)}@agent")


def test_nothing_queued_is_answered_by_one_statement(user, django_assert_num_queries):
    CallFactory(owner=user, status=CallState.DIALING)
    CallFactory(owner=user, status=CallState.COMPLETED)
    with django_assert_num_queries(1):
        assert claim(10) == []


@pytest.mark.parametrize("compiled", [True, False])
def test_queued_calls_are_claimed_oldest_first_up_to_the_room(user, settings, compiled):
    settings.COMPILED_QUERIES = compiled
    now = timezone.now()
    calls = [
        CallFactory(owner=user, call_id=f"c{n}", step_deadline=now + timedelta(seconds=n))
        for n in (3, 1, 2)
    ]
    claimed = claim(2)
    assert [c.call_id for c in claimed] == ["c1", "c2"]
    rows = {c.call_id: c for c in Call.objects.filter(pk__in=[c.pk for c in calls])}
    assert (rows["c1"].status, rows["c2"].status, rows["c3"].status) == (
        CallState.DIALING,
        CallState.DIALING,
        CallState.QUEUED,
    )
    assert rows["c1"].sip_call_id and rows["c1"].sip_call_id != rows["c2"].sip_call_id
    assert [c.call_id for c in claim(5)] == ["c3"]
    assert claim(5) == []
