from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from calls.models import Call, CallEvent
from calls.states import CallState
from core.errors import ApplicationError, InvalidRequest, RateLimited
from realtime import selectors, services, tasks
from realtime.providers.simulated import spoken_seconds
from tests.conftest import drain_tasks
from tests.factories import NumberFactory

pytestmark = pytest.mark.django_db


def submit(user, call_id="c1", to="+442079460120", message="Hello there", from_number=None):
    data = {"callId": call_id, "to": to, "message": message}
    if from_number is not None:
        data["from"] = from_number
    return services.call_submit(user=user, data=data)


def timeline(call):
    return list(
        CallEvent.objects.filter(call=call).order_by("at", "id").values_list("status", flat=True)
    )


def test_a_submitted_call_is_committed_with_its_dispatch_task(user):
    call, created = submit(user)

    assert created
    assert call.status == CallState.QUEUED
    assert Call.objects.filter(pk=call.pk, status="queued").exists()
    assert (
        DBTaskResult.objects.filter(args_kwargs__kwargs__call_request_id=str(call.pk)).count() == 1
    )


def test_a_completed_call_walks_every_state_and_gets_its_spoken_duration(user):
    message = " ".join(["word"] * 50)  # 50 words at 150 a minute: 20 seconds
    call, _ = submit(user, message=message)

    drain_tasks()

    call.refresh_from_db()
    assert call.status == "completed"
    assert call.duration == spoken_seconds(message) == 20
    assert timeline(call) == ["queued", "dialing", "ringing", "in_progress", "completed"]
    assert call.dialing_at and call.ringing_at and call.answered_at and call.ended_at
    assert call.sip_call_id.startswith("sim-")
    assert call.step_deadline is None


@pytest.mark.parametrize(
    ("digit", "ending", "reason"),
    [("7", "busy", ""), ("8", "no_answer", ""), ("9", "failed", "unreachable")],
)
def test_the_last_digit_of_the_target_picks_the_ending(user, digit, ending, reason):
    call, _ = submit(user, to=f"+44207946012{digit}")

    drain_tasks()

    call.refresh_from_db()
    assert (call.status, call.failure_reason) == (ending, reason)
    assert timeline(call) == ["queued", "dialing", "ringing", ending]


def test_the_same_call_id_again_creates_nothing(user):
    first, _ = submit(user)
    again, created = submit(user, to="+442079460127", message="different body")

    assert not created
    assert again.pk == first.pk
    assert Call.objects.count() == 1
    assert DBTaskResult.objects.count() == 1


def test_the_same_call_id_for_another_user_is_another_call(user, other_user):
    submit(user)
    _, created = submit(other_user)

    assert created
    assert Call.objects.count() == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"to": "07700900123"}, "to"),
        ({"to": "+44"}, "to"),
        ({"to": "+447700900123"}, "to"),  # a drama-range mobile: not a dialable number
        ({"to": 442079460120}, "to"),
        ({"message": ""}, "message"),
        ({"message": "   "}, "message"),
        ({"message": "x" * 1001}, "message"),
        ({"message": None}, "message"),
        ({"call_id": ""}, "callId"),
        ({"call_id": None}, "callId"),
        ({"call_id": "x" * 65}, "callId"),
        ({"call_id": "bad\nid"}, "callId"),
    ],
)
def test_bad_calls_are_refused_naming_the_field(user, kwargs, field):
    with pytest.raises(InvalidRequest) as error:
        submit(user, **kwargs)

    assert field in error.value.fields
    assert not Call.objects.exists()


def test_a_thousand_character_message_is_accepted(user):
    call, created = submit(user, message="x" * 1000)
    assert created


def test_calls_come_from_the_oldest_number_by_default(user):
    oldest = NumberFactory(owner=user)
    NumberFactory(owner=user)

    call, _ = submit(user)

    assert (call.number, call.caller_id) == (oldest, oldest.number)


def test_a_user_without_numbers_calls_from_the_service_caller_id(user, settings):
    call, _ = submit(user)
    assert call.number is None and call.caller_id == settings.SERVICE_CALLER_ID


def test_from_must_be_one_of_the_callers_numbers(user, other_user):
    mine = NumberFactory(owner=user)
    theirs = NumberFactory(owner=other_user)

    call, _ = submit(user, from_number=mine.number)
    with pytest.raises(InvalidRequest) as error:
        submit(user, call_id="c2", from_number=theirs.number)

    assert call.number == mine
    assert "from" in error.value.fields


def test_deleting_the_from_number_keeps_the_call(user):
    number = NumberFactory(owner=user)
    call, _ = submit(user)

    number.delete()

    call.refresh_from_db()
    assert call.number is None and call.caller_id == number.number


def test_calls_are_rate_limited_per_user(user, settings):
    settings.RATE_LIMIT_CALLS_PER_USER = "3/m"
    for i in range(3):
        submit(user, call_id=f"c{i}")

    with pytest.raises(RateLimited):
        submit(user, call_id="c4")
    submit(user, call_id="c0")  # a duplicate is not a new call: not counted, not refused


def test_a_queued_call_can_be_canceled_and_is_then_never_placed(user):
    call, _ = submit(user)

    services.call_cancel(call=selectors.call_access(user=user, call_id="c1"))
    drain_tasks()

    call.refresh_from_db()
    assert call.status == "canceled"
    assert timeline(call) == ["queued", "canceled"]


def test_a_placed_call_can_be_canceled_and_the_provider_goes_no_further(user):
    call, _ = submit(user)
    tasks.advance_call.call(call_request_id=str(call.pk), expected_status="queued")

    services.call_cancel(call=selectors.call_access(user=user, call_id="c1"))
    drain_tasks()

    call.refresh_from_db()
    assert call.status == "canceled"
    assert timeline(call) == ["queued", "dialing", "canceled"]


def test_a_call_that_has_ended_cannot_be_canceled(user):
    submit(user)
    drain_tasks()

    with pytest.raises(ApplicationError) as error:
        services.call_cancel(call=selectors.call_access(user=user, call_id="c1"))
    assert error.value.code == "call_not_cancelable"
    assert selectors.call_access(user=user, call_id="c1").status == "completed"


def test_a_provider_error_fails_the_call_instead_of_hanging(user, monkeypatch):
    from realtime.providers.simulated import SimulatedProvider

    def explode(self, call):
        raise ConnectionError("provider down")

    monkeypatch.setattr(SimulatedProvider, "advance", explode)
    call, _ = submit(user)

    drain_tasks()

    call.refresh_from_db()
    assert call.status == "failed"
    assert "ConnectionError" in call.failure_reason


def _strand(call, status):
    """Leave `call` in `status` with its step overdue and no task: a worker died mid-step."""
    DBTaskResult.objects.all().delete()
    Call.objects.filter(pk=call.pk).update(
        status=status, step_deadline=timezone.now() - timedelta(seconds=1)
    )


def test_recovery_drives_a_stranded_call_to_its_end(user):
    call, _ = submit(user)
    _strand(call, "ringing")

    assert tasks.calls_recover() == 1
    drain_tasks()

    call.refresh_from_db()
    assert call.status == "completed"
    assert call.recoveries == 1


def test_recovery_gives_up_after_the_configured_tries_with_a_reason(user, settings):
    settings.CALL_MAX_RECOVERIES = 1
    call, _ = submit(user)
    _strand(call, "dialing")
    tasks.calls_recover()
    _strand(call, "dialing")

    tasks.calls_recover()

    call.refresh_from_db()
    assert call.status == "failed"
    assert call.failure_reason.startswith("interrupted")


def test_recovery_leaves_a_call_that_is_only_waiting_in_the_queue(user):
    call, _ = submit(user)
    Call.objects.filter(pk=call.pk).update(step_deadline=timezone.now() - timedelta(seconds=1))

    assert tasks.calls_recover() == 0

    call.refresh_from_db()
    assert call.step_deadline > timezone.now()
    assert DBTaskResult.objects.count() == 1


# --- the answered seconds of the plan (accounts.quotas) ---------------------------------------
def _seconds_quota(settings, seconds: int) -> None:
    settings.PLANS = {"free": {**settings.PLANS["free"], "call_seconds_per_day": seconds}}


def test_a_call_whose_answered_seconds_run_out_is_hung_up_completed_with_reason_quota(
    user, settings
):
    _seconds_quota(settings, 30)
    earlier, _ = submit(user, call_id="earlier", message=" ".join(["word"] * 45))  # 18 s
    drain_tasks()
    message = " ".join(["word"] * 50)  # 20 s, with 12 s of the day left

    call, _ = submit(user, message=message)
    drain_tasks()

    call.refresh_from_db()
    earlier.refresh_from_db()
    assert (earlier.status, earlier.duration, earlier.failure_reason) == ("completed", 18, "")
    assert (call.status, call.duration, call.failure_reason, call.talk_limit) == (
        "completed",
        12,
        "quota",
        12,
    )
    assert timeline(call) == ["queued", "dialing", "ringing", "in_progress", "completed"]
    with pytest.raises(RateLimited) as refused:  # the day's 30 s are used up
        submit(user, call_id="next")
    assert refused.value.code == "quota_exceeded"


def test_calls_answered_at_once_share_what_is_left_and_never_talk_past_it(user, settings):
    _seconds_quota(settings, 30)
    first, _ = submit(user, call_id="first", message=" ".join(["word"] * 50))  # 20 s each
    second, _ = submit(user, call_id="second", to="+442079460121", message=" ".join(["w"] * 50))

    drain_tasks()

    first.refresh_from_db()
    second.refresh_from_db()
    assert sorted([first.duration, second.duration]) == [10, 20]
    assert sorted([first.failure_reason, second.failure_reason]) == ["", "quota"]
    assert first.status == second.status == "completed"


def test_a_call_within_the_days_seconds_is_granted_its_whole_talk(user, settings):
    _seconds_quota(settings, 1800)

    call, _ = submit(user, message=" ".join(["word"] * 50))
    drain_tasks()

    call.refresh_from_db()
    assert (call.status, call.duration, call.failure_reason, call.talk_limit) == (
        "completed",
        20,
        "",
        20,
    )


def test_unlimited_answered_seconds_grant_no_limit(user, settings):
    _seconds_quota(settings, None)

    call, _ = submit(user, message=" ".join(["word"] * 50))
    drain_tasks()

    call.refresh_from_db()
    assert (call.duration, call.failure_reason, call.talk_limit) == (20, "", None)
