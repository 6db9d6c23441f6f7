"""On PostgreSQL, threads that submit, drive, cancel and recount one owner's calls all at once,
each on its own connection, leave the counters equal to a COUNT over the calls."""

import pytest

from calls.models import Call
from calls.states import TERMINAL_STATES, CallState
from core.errors import ApplicationError, ErrorCode
from realtime import pipeline, services
from realtime.providers import Step
from realtime.selectors import calls_page
from realtime.services import call_counters_recount
from tests.factories import UserFactory
from tests.totals import CONCURRENT_WRITERS, assert_totals_exact, run_together

pytestmark = [pytest.mark.django_db(transaction=True), CONCURRENT_WRITERS]

CALLS = 30
WALK = [CallState.DIALING, CallState.RINGING, CallState.IN_PROGRESS, CallState.COMPLETED]


def submit(user, call_id: str):
    return services.call_submit(
        user=user, data={"callId": call_id, "to": "+442079460120", "message": "Hello there"}
    )


def test_concurrent_submits_transitions_cancels_and_recounts_never_make_the_counters_drift(
    settings,
):
    settings.RATE_LIMIT_CALLS_PER_USER = "1000000/m"
    owner = UserFactory(unmetered=True)  # 60 calls up at once: far past the free plan
    queued = [submit(owner, f"early-{i}")[0].pk for i in range(CALLS)]

    def agent():
        # Every agent tries every step of every call: the conditional UPDATE lets exactly
        # one of them make each move, and a canceled call stops moving.
        moves = 0
        for pk in queued:
            call = Call.objects.get(pk=pk)
            for status in WALK:
                expected = call.status
                if expected in TERMINAL_STATES:
                    break
                if pipeline.call_transition(
                    call=call, step=Step(status=status), expected_status=expected
                ):
                    moves += 1
                else:
                    call.refresh_from_db()
        return moves

    def canceler():
        canceled = 0
        for pk in queued[::3]:
            try:
                services.call_cancel(call=Call.objects.get(pk=pk))
                canceled += 1
            except ApplicationError as error:
                assert error.code == ErrorCode.CALL_NOT_CANCELABLE
        return canceled

    def submitter():
        # Both submitters send the same callIds: each is created once, by one of them.
        return sum(submit(owner, f"late-{i}")[1] for i in range(CALLS))

    results = run_together(
        [agent, agent, agent, canceler, canceler, submitter, submitter, call_counters_recount]
    )

    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, errors
    assert results[-1] == [], "a recount beside live writers found drift that was not there"
    assert results[5] + results[6] == CALLS
    assert_totals_exact()
    assert calls_page(user=owner, status=None, limit=1, offset=0).total == 2 * CALLS
    for status in CallState.values:
        page = calls_page(user=owner, status=status, limit=1, offset=0)
        assert page.total == Call.objects.filter(owner=owner, status=status).count()
