"""realtime.services.calls_submit: calls that arrive together are written in one
transaction, and each is judged as if it came alone: every submit ends created, found
again (its callId) or refused, and only what is created is written, counted and pushed."""

import threading

import pytest
from django.db import connection
from django_tasks_db.models import DBTaskResult

from accounts.models import DialRefusal
from calls.models import Call, CallCounter, CallEvent
from core.errors import ApplicationError
from realtime.services import Submit, calls_submit
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def frame(call_id, to="+442079460120", **extra):
    return {"type": "call", "callId": call_id, "to": to, "message": "hi", **extra}


def submits(*pairs):
    return [Submit(user=user, data=data, pushes=[]) for user, data in pairs]


def codes(outcomes):
    """Each outcome as "created", "again" (an existing call) or its error code."""
    return [
        o.code.value if isinstance(o, ApplicationError) else ("created" if o[1] else "again")
        for o in outcomes
    ]


def written(user):
    """What the batch left for `user`: callIds, events, queued tasks and counted calls."""
    calls = set(Call.objects.filter(owner=user).values_list("call_id", flat=True))
    events = CallEvent.objects.filter(call__owner=user, status="queued").count()
    counted = CallCounter.objects.filter(owner=user, status="queued").first()
    return calls, events, counted.count if counted else 0


def test_a_batch_of_several_users_writes_every_call_with_its_event_task_and_count():
    alice, bob = UserFactory(unmetered=True), UserFactory(unmetered=True)
    batch = submits((alice, frame("a1")), (bob, frame("b1")), (alice, frame("a2")))

    outcomes = calls_submit(submits=batch)

    assert codes(outcomes) == ["created"] * 3
    assert written(alice) == ({"a1", "a2"}, 2, 2)
    assert written(bob) == ({"b1"}, 1, 1)
    tasks = DBTaskResult.objects.filter(task_path="realtime.tasks.advance_call")
    assert sorted(t.args_kwargs["kwargs"]["call_request_id"] for t in tasks) == sorted(
        str(call.pk) for call, _ in outcomes
    )


def test_each_submit_collects_only_its_own_calls_push(django_capture_on_commit_callbacks):
    alice, bob = UserFactory(unmetered=True), UserFactory(unmetered=True)
    batch = submits((alice, frame("a1")), (bob, frame("b1")))

    with django_capture_on_commit_callbacks(execute=True):
        calls_submit(submits=batch)

    for submit, call_id in zip(batch, ["a1", "b1"], strict=True):
        [(group, message)] = submit.pushes
        assert group == f"user.{submit.user.pk}"
        assert (message["event"]["callId"], message["event"]["status"]) == (call_id, "queued")


def test_refused_submits_write_nothing_and_leave_the_others_created(
    django_capture_on_commit_callbacks,
):
    user = UserFactory(unmetered=True)
    batch = submits(
        (user, frame("ok1")),
        (user, frame("bad", to="not a number")),
        (user, frame("premium", to="+449098790000")),
        (user, frame("ok2")),
    )

    with django_capture_on_commit_callbacks(execute=True):
        outcomes = calls_submit(submits=batch)

    assert codes(outcomes) == ["created", "invalid_request", "destination_not_allowed", "created"]
    assert written(user) == ({"ok1", "ok2"}, 2, 2)
    assert list(DialRefusal.objects.filter(user=user).values_list("kind", flat=True)) == [
        DialRefusal.Kind.DESTINATION
    ]
    assert [len(submit.pushes) for submit in batch] == [1, 0, 0, 1]


def test_a_quota_counts_the_batchs_own_earlier_calls():
    user = UserFactory(concurrent_calls=2, calls_per_day=100)
    batch = submits(*[(user, frame(f"c{i}")) for i in range(4)])

    outcomes = calls_submit(submits=batch)

    assert codes(outcomes) == ["created", "created", "quota_exceeded", "quota_exceeded"]
    assert outcomes[2].quota == "concurrent_calls"
    assert written(user) == ({"c0", "c1"}, 2, 2)
    assert DialRefusal.objects.filter(user=user, kind=DialRefusal.Kind.QUOTA).count() == 2


def test_the_daily_quota_within_a_batch_says_when_to_try_again():
    user = UserFactory(concurrent_calls=10, calls_per_day=1)

    outcomes = calls_submit(submits=submits((user, frame("first")), (user, frame("second"))))

    assert codes(outcomes) == ["created", "quota_exceeded"]
    assert outcomes[1].quota == "calls_per_day"
    assert 86_000 < outcomes[1].retry_after <= 86_400  # when `first` leaves the window


def test_a_callid_twice_in_one_batch_is_one_call(django_capture_on_commit_callbacks):
    user = UserFactory(unmetered=True)
    batch = submits((user, frame("same")), (user, frame("same", message="other")))

    with django_capture_on_commit_callbacks(execute=True):
        outcomes = calls_submit(submits=batch)

    assert codes(outcomes) == ["created", "again"]
    assert outcomes[0][0].pk == outcomes[1][0].pk
    assert written(user) == ({"same"}, 1, 1)
    assert [len(submit.pushes) for submit in batch] == [1, 0]  # nothing new to say about it


def test_callids_of_every_json_type_are_refused_alone():
    user = UserFactory(unmetered=True)
    odd = [["a"], {"a": 1}, 7, None, True, "bad\u0000id"]
    batch = submits(*[(user, frame(call_id)) for call_id in odd], (user, frame("fine")))

    outcomes = calls_submit(submits=batch)

    assert codes(outcomes) == ["invalid_request"] * len(odd) + ["created"]
    assert written(user) == ({"fine"}, 1, 1)


def test_a_callid_already_stored_is_found_not_written_again():
    user = UserFactory(unmetered=True)
    [(first, _)] = calls_submit(submits=submits((user, frame("kept"))))

    outcomes = calls_submit(submits=submits((user, frame("kept")), (user, frame("new"))))

    assert codes(outcomes) == ["again", "created"]
    assert outcomes[0][0].pk == first.pk
    assert written(user) == ({"kept", "new"}, 2, 2)


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="on SQLite a write waits for the batch's transaction, so nothing can slip in",
)
@pytest.mark.django_db(transaction=True)
def test_a_callid_a_concurrent_writer_commits_mid_batch_is_found_again_and_the_rest_written():
    """A writer that takes no user lock (as staff in the admin) commits one of the batch's
    callIds between the batch's checks and its INSERT: the database refuses the whole INSERT,
    and each submit is tried again alone."""
    alice, bob = UserFactory(unmetered=True), UserFactory(unmetered=True)
    batch = submits((alice, frame("raced")), (bob, frame("calm")))
    slipped = []

    def other_writer():
        slipped.append(Call.objects.create(owner=alice, call_id="raced", to="+44"))
        connection.close()

    def just_before_the_insert(execute, sql, params, many, context):
        if sql.startswith('INSERT INTO "calls_call"') and not slipped:
            writer = threading.Thread(target=other_writer)
            writer.start()
            writer.join()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(just_before_the_insert):
        outcomes = calls_submit(submits=batch)

    assert codes(outcomes) == ["again", "created"]
    assert outcomes[0][0].pk == slipped[0].pk
    assert written(bob) == ({"calm"}, 1, 1)
    assert Call.objects.filter(owner=alice).count() == 1
