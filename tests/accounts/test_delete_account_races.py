"""Deleting an account while one of its calls moves on elsewhere (the telephony agent, a
worker's step): on PostgreSQL, where they truly run at once, each call still ends in exactly
one terminal state, and nothing the other side writes outlives the deletion."""

import threading

import pytest
from django.db import connection

from accounts import services
from accounts.models import User
from calls.models import Call, CallEvent
from calls.states import CallState
from realtime import pipeline
from realtime.providers import Step
from tests.factories import DEFAULT_PASSWORD, CallFactory, UserFactory

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="on SQLite a write waits for the deletion's whole transaction: nothing can race",
    ),
    pytest.mark.django_db(transaction=True),
]

CANCEL_SQL = 'UPDATE "calls_call" SET "status" = '


def moved_elsewhere(call: Call, step: Step, expected: str, results: list) -> None:
    """What the agent or a worker does to the call it holds (read before the deletion), on
    a connection of its own."""
    try:
        results.append(pipeline.call_transition(call=call, step=step, expected_status=expected))
    finally:
        connection.close()


def delete(user) -> None:
    services.user_delete(user=user, password=DEFAULT_PASSWORD, otp=None, ip="192.0.2.7")


def test_a_call_that_ends_elsewhere_while_the_account_goes_keeps_that_one_end():
    user = UserFactory()
    call = CallFactory(owner=user, status=CallState.IN_PROGRESS)
    elsewhere: list = []
    ends = []
    real = pipeline.call_transition

    def watched(*, call, step, expected_status):
        moved = real(call=call, step=step, expected_status=expected_status)
        ends.append((step.status, moved))
        return moved

    def hang_up_first(execute, sql, params, many, context):
        # The callee hangs up just before the deletion cancels the call.
        if sql.startswith(CANCEL_SQL) and not elsewhere:
            step = Step(status=CallState.COMPLETED, duration=12)
            other = threading.Thread(
                target=moved_elsewhere, args=(call, step, CallState.IN_PROGRESS, elsewhere)
            )
            other.start()
            other.join(timeout=30)
        return execute(sql, params, many, context)

    pipeline.call_transition = watched
    try:
        with connection.execute_wrapper(hang_up_first):
            delete(user)
    finally:
        pipeline.call_transition = real

    assert elsewhere == [True]
    # The hang-up won: the call completed, and the deletion's cancel changed nothing.
    assert ends == [(CallState.COMPLETED, True), (CallState.CANCELED, False)]
    assert not User.objects.filter(pk=user.pk).exists()
    assert not Call.objects.filter(pk=call.pk).exists()
    assert not CallEvent.objects.filter(call_id=call.pk).exists()


def test_a_call_answered_while_the_account_goes_is_canceled_once_and_the_answer_finds_nothing():
    user = UserFactory()
    call = CallFactory(owner=user, status=CallState.RINGING)
    elsewhere: list = []
    waiting: list[threading.Thread] = []

    def answer_meanwhile(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        # The callee answers just after the deletion canceled the call, before it commits:
        # the answer waits for the deletion's locks.
        if sql.startswith(CANCEL_SQL) and not waiting:
            step = Step(status=CallState.IN_PROGRESS, wait=5.0)
            other = threading.Thread(
                target=moved_elsewhere, args=(call, step, CallState.RINGING, elsewhere)
            )
            other.start()
            waiting.append(other)
        return result

    with connection.execute_wrapper(answer_meanwhile):
        delete(user)
    waiting[0].join(timeout=30)

    assert not waiting[0].is_alive()
    # The answer waited for the owner's row (its talk is granted under that lock), then
    # found the owner gone: nothing moved, nothing was written.
    assert elsewhere == [False]
    assert not User.objects.filter(pk=user.pk).exists()
    assert not Call.objects.filter(pk=call.pk).exists()
    assert not CallEvent.objects.filter(call_id=call.pk).exists()
