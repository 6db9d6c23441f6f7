"""`total` of the call list is a sum of per-(owner, status) counters; submit and every state
change move them in the call's own transaction."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from calls.models import Call, CallCounter
from core.errors import InvalidRequest
from realtime import services, tasks
from realtime.selectors import calls_page
from tests.conftest import drain_tasks
from tests.factories import CallFactory
from tests.totals import assert_totals_exact, calls_counted

pytestmark = pytest.mark.django_db

# The simulated provider ends a call by the last digit of its target (test_pipeline.py).
ENDINGS = {"+442079460120": "completed", "+442079460127": "busy", "+442079460129": "failed"}


def submit(user, call_id, to="+442079460120"):
    return services.call_submit(
        user=user, data={"callId": call_id, "to": to, "message": "Hello there"}
    )


def test_a_submitted_call_is_counted_as_queued_once(user):
    submit(user, "c1")
    submit(user, "c1")  # the same callId again creates nothing

    assert calls_counted() == {(user.pk, "queued"): 1}


def test_a_refused_submit_counts_nothing(user):
    with pytest.raises(InvalidRequest):
        submit(user, "c1", to="not a number")

    assert not CallCounter.objects.filter(count__gt=0).exists()


def test_every_state_change_moves_one_call_between_counters(user, client_jwt):
    for i, to in enumerate(ENDINGS):
        submit(user, f"c{i}", to=to)

    drain_tasks()

    assert calls_counted() == {(user.pk, ending): 1 for ending in ENDINGS.values()}
    body = client_jwt.get("/api/calls", {"status": "busy"}).json()
    assert (body["total"], [c["callId"] for c in body["calls"]]) == (1, ["c1"])
    assert client_jwt.get("/api/calls", {"status": "queued"}).json()["total"] == 0
    assert client_jwt.get("/api/calls").json()["total"] == 3
    assert_totals_exact()


def test_canceling_moves_the_call_to_canceled(user, client_jwt):
    submit(user, "c1")

    client_jwt.post("/api/calls/c1/cancel")

    assert calls_counted() == {(user.pk, "canceled"): 1}
    assert_totals_exact()


def test_the_admin_cancel_action_keeps_the_totals_exact(staff_client, user):
    call, _ = submit(user, "c1")

    staff_client.post(
        "/admin/calls/call/", {"action": "cancel_calls", "_selected_action": [call.pk]}
    )

    assert Call.objects.get(pk=call.pk).status == "canceled"
    assert_totals_exact()


def test_a_call_recovery_gives_up_on_is_counted_as_failed(user, settings):
    settings.CALL_MAX_RECOVERIES = 0
    call, _ = submit(user, "c1")
    DBTaskResult.objects.all().delete()  # its worker died with the step
    Call.objects.filter(pk=call.pk).update(step_deadline=timezone.now() - timedelta(seconds=1))

    tasks.calls_recover()

    assert calls_counted() == {(user.pk, "failed"): 1}
    assert_totals_exact()


def test_deleting_a_user_takes_their_call_counters(user, other_user):
    submit(user, "c1")
    submit(other_user, "c1")

    user.delete()

    assert calls_counted() == {(other_user.pk, "queued"): 1}
    assert_totals_exact()


def test_factory_calls_are_counted_like_submitted_ones(user):
    CallFactory.create_batch(2, owner=user)
    CallFactory(owner=user, status="completed")

    assert calls_counted() == {(user.pk, "queued"): 2, (user.pk, "completed"): 1}


def test_the_first_page_costs_two_queries(user, django_assert_max_num_queries):
    CallFactory.create_batch(3, owner=user)

    with django_assert_max_num_queries(2):  # the counters' sum, the page
        page = calls_page(user=user, status=None, limit=2, offset=0)

    assert (page.total, len(page.records)) == (3, 2)
    assert page.next_cursor is not None
