"""Plan quotas (issue 27): calls and answered seconds per rolling day and calls up at once,
counted exactly (under concurrent submits too), refused with `quota_exceeded` and
Retry-After on every path, shown in /api/user/me, set per plan in settings or per user by
staff. The hang-up at the seconds quota: tests/realtime/test_pipeline.py (simulated) and
tests/telephony/test_trunk.py (SIP, against SIPp)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import DialRefusal
from accounts.quotas import QuotaExceeded
from calls.models import Call
from calls.states import CallState
from realtime.services import call_submit
from tests.factories import CallFactory, UserFactory
from tests.totals import CONCURRENT_WRITERS, run_together

DAY = 24 * 3600


def plans(**free) -> dict:
    """settings.PLANS with the free plan's limits changed; the rest high enough to never
    stand in the way."""
    limits = {
        "numbers": 5,
        "calls_per_day": 1000,
        "call_seconds_per_day": 10**6,
        "concurrent_calls": 1000,
    }
    return {"free": {**limits, **free}}


def submit(client, call_id: str, to: str = "+442079460120"):
    return client.post("/api/calls", {"callId": call_id, "to": to, "message": "Hi"}, format="json")


def ended(owner, *, ago: timedelta, answered: int | None = None, **extra):
    """A call of `owner` created `ago`, ended; answered for `answered` seconds if given."""
    created = timezone.now() - ago
    values = {"status": CallState.COMPLETED, "ended_at": created + timedelta(minutes=1)}
    if answered is not None:
        values.update(answered_at=created + timedelta(seconds=5), duration=answered)
    call = CallFactory(owner=owner, **values, **extra)
    Call.objects.filter(pk=call.pk).update(created_at=created)
    return call


# --- calls per day ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_calls_past_the_days_quota_get_429_with_retry_after_and_no_call(settings, user, client_jwt):
    settings.PLANS = plans(calls_per_day=2)
    for i in range(2):
        assert submit(client_jwt, f"c{i}").status_code == 202
        Call.objects.filter(call_id=f"c{i}").update(ended_at=timezone.now())

    response = submit(client_jwt, "c2")

    assert response.status_code == 429, response.content
    body = response.json()
    assert body["code"] == "quota_exceeded"
    assert "2 call(s) a day" in body["error"]
    # The first call leaves the rolling day in 24 hours.
    assert DAY - 60 <= int(response["Retry-After"]) <= DAY
    assert response["X-RateLimit-Limit"] == "2"
    assert response["X-RateLimit-Remaining"] == "0"
    assert Call.objects.count() == 2
    refusal = DialRefusal.objects.get(user=user)
    assert (refusal.kind, refusal.reason) == ("quota", "calls_per_day")


@pytest.mark.django_db
def test_the_day_rolls_calls_older_than_24_hours_do_not_count(settings, user, client_jwt):
    settings.PLANS = plans(calls_per_day=2)
    ended(user, ago=timedelta(hours=25))
    ended(user, ago=timedelta(hours=23))
    ended(user, ago=timedelta(hours=22))

    refused = submit(client_jwt, "now")

    assert refused.status_code == 429
    # The one of 23 hours ago leaves the day first, an hour from now.
    assert 3600 - 60 <= int(refused["Retry-After"]) <= 3600
    Call.objects.filter(owner=user).update(created_at=timezone.now() - timedelta(hours=25))
    assert submit(client_jwt, "later").status_code == 202


@pytest.mark.django_db
def test_a_zero_quota_refuses_every_call_and_waits_a_whole_day(settings, client_jwt):
    settings.PLANS = plans(calls_per_day=0)

    response = submit(client_jwt, "c1")

    assert response.status_code == 429
    assert response["Retry-After"] == str(DAY)
    assert response["X-RateLimit-Limit"] == "0"


# --- calls at once ------------------------------------------------------------------------------
@pytest.mark.django_db
def test_calls_up_at_once_are_capped_until_one_ends(settings, user, client_jwt):
    settings.PLANS = plans(concurrent_calls=2)
    assert submit(client_jwt, "c1").status_code == 202
    assert submit(client_jwt, "c2").status_code == 202

    refused = submit(client_jwt, "c3")

    assert refused.status_code == 429
    assert refused.json()["code"] == "quota_exceeded"
    assert "2 call(s) at once" in refused.json()["error"]
    assert refused["Retry-After"] == "10"
    Call.objects.filter(call_id="c1").update(status=CallState.COMPLETED, ended_at=timezone.now())
    assert submit(client_jwt, "c3").status_code == 202


# --- answered seconds per day -------------------------------------------------------------------
@pytest.mark.django_db
def test_answered_seconds_used_up_refuse_the_next_call_until_they_leave_the_day(
    settings, user, client_jwt
):
    settings.PLANS = plans(call_seconds_per_day=60)
    ended(user, ago=timedelta(hours=2), answered=40)
    ended(user, ago=timedelta(hours=1), answered=20)
    ended(user, ago=timedelta(minutes=30))  # not answered: no seconds

    refused = submit(client_jwt, "c1")

    assert refused.status_code == 429
    assert "60 answered seconds a day" in refused.json()["error"]
    # The call answered 2 hours ago (less the 5 s it rang) leaves the day in 22 hours.
    assert 22 * 3600 - 60 <= int(refused["Retry-After"]) <= 22 * 3600 + 60
    assert DialRefusal.objects.get(user=user).reason == "call_seconds_per_day"


@pytest.mark.django_db
def test_staffs_limits_for_one_user_replace_the_plans(settings, user, client_jwt, outsider):
    settings.PLANS = plans(concurrent_calls=1)
    user.concurrent_calls = 3
    user.save(update_fields=["concurrent_calls"])

    assert [submit(client_jwt, f"c{i}").status_code for i in range(4)] == [202, 202, 202, 429]
    assert [submit(outsider, f"o{i}").status_code for i in range(2)] == [202, 429]


@pytest.mark.django_db
def test_a_plan_from_settings_gives_its_own_limits(settings, user, client_jwt):
    settings.PLANS = {
        **plans(concurrent_calls=1),
        "pro": {**plans()["free"], "concurrent_calls": 2},
    }
    user.plan = "pro"
    user.save(update_fields=["plan"])

    assert [submit(client_jwt, f"c{i}").status_code for i in range(3)] == [202, 202, 429]


@pytest.mark.django_db
def test_unlimited_quotas_never_refuse(settings, client_jwt):
    settings.PLANS = plans(calls_per_day=None, call_seconds_per_day=None, concurrent_calls=None)

    assert all(submit(client_jwt, f"c{i}").status_code == 202 for i in range(8))


# --- the socket ---------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_the_socket_answers_an_error_frame_with_retry_after(settings, user, communicator):
    settings.PLANS = plans(concurrent_calls=1)
    ws, connected = await communicator(user)
    assert connected
    await ws.send_json_to({"type": "call", "callId": "c1", "to": "+442079460120", "message": "a"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "call_ack"
    await ws.receive_json_from(timeout=5)  # its queued status

    await ws.send_json_to({"type": "call", "callId": "c2", "to": "+442079460121", "message": "b"})
    frame = await ws.receive_json_from(timeout=5)

    assert frame["type"] == "error"
    assert (frame["callId"], frame["code"], frame["retryAfter"]) == ("c2", "quota_exceeded", 10)
    assert "1 call(s) at once" in frame["error"]


# --- concurrent submits -------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@CONCURRENT_WRITERS
@pytest.mark.parametrize("quota", ["concurrent_calls", "calls_per_day"])
def test_concurrent_submits_never_place_one_call_over_the_quota(settings, quota):
    settings.RATE_LIMIT_CALLS_PER_USER = "1000000/m"
    settings.PLANS = plans(**{quota: 3})
    owner = UserFactory()
    submitters = 16

    def submit_one(n: int):
        def run():
            data = {"callId": f"race-{n}", "to": "+442079460120", "message": "Hello"}
            return call_submit(user=owner, data=data)[1]

        return run

    results = run_together([submit_one(n) for n in range(submitters)])

    placed = [r for r in results if r is True]
    refused = [r for r in results if isinstance(r, QuotaExceeded)]
    assert len(placed) == 3, results
    assert len(refused) == submitters - 3, results
    assert all(r.quota == quota for r in refused)
    assert Call.objects.filter(owner=owner).count() == 3
    assert DialRefusal.objects.filter(user=owner, reason=quota).count() == submitters - 3


# --- /api/user/me -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_me_shows_each_quota_with_its_use_and_reset(settings, user, client_jwt):
    settings.PLANS = plans(calls_per_day=50, call_seconds_per_day=1800, concurrent_calls=3)
    first = ended(user, ago=timedelta(hours=20), answered=30)
    ended(user, ago=timedelta(hours=2), answered=12)
    ended(user, ago=timedelta(hours=30), answered=999)  # outside the day
    up = CallFactory(owner=user, status=CallState.RINGING)

    quotas = client_jwt.get("/api/user/me").json()["quotas"]

    first.refresh_from_db()
    up.refresh_from_db()
    day_ms = DAY * 1000
    assert quotas == {
        "callsPerDay": {
            "limit": 50,
            "used": 3,
            "resetsAt": int(first.created_at.timestamp() * 1000) + day_ms,
        },
        "callSecondsPerDay": {
            "limit": 1800,
            "used": 42,
            "resetsAt": int(first.answered_at.timestamp() * 1000) + day_ms,
        },
        "concurrentCalls": {"limit": 3, "used": 1, "resetsAt": None},
    }


@pytest.mark.django_db
def test_me_shows_unlimited_quotas_as_null_and_a_fresh_user_with_nothing_used(settings, client_jwt):
    settings.PLANS = plans(call_seconds_per_day=None)

    quotas = client_jwt.get("/api/user/me").json()["quotas"]

    assert quotas["callSecondsPerDay"] == {"limit": None, "used": 0, "resetsAt": None}
    assert quotas["callsPerDay"] == {"limit": 1000, "used": 0, "resetsAt": None}


@pytest.mark.django_db
def test_me_counts_the_use_afresh_on_every_request(settings, user, client_jwt):
    settings.PLANS = plans(calls_per_day=50)
    assert client_jwt.get("/api/user/me").json()["quotas"]["callsPerDay"]["used"] == 0

    ended(user, ago=timedelta(hours=1), answered=5)
    CallFactory(owner=user, status=CallState.RINGING)

    quotas = client_jwt.get("/api/user/me").json()["quotas"]
    assert quotas["callsPerDay"]["used"] == 2
    assert quotas["callSecondsPerDay"]["used"] == 5
    assert quotas["concurrentCalls"]["used"] == 1


@pytest.mark.django_db
def test_a_batchs_read_of_its_users_use_is_each_users_own(user):
    """accounts.quotas.uses_of (a batch of submits, one grouped query) gives each user what
    the use of that user alone is (the query of GET /api/user/me), whatever the user holds."""
    from accounts import quotas

    ended(user, ago=timedelta(hours=2), answered=40)
    ended(user, ago=timedelta(hours=30), answered=60)  # out of the day
    CallFactory(owner=user, status=CallState.IN_PROGRESS, answered_at=timezone.now(),
                       talk_limit=90)  # fmt: skip
    CallFactory(owner=user)
    outsider, idle = UserFactory(), UserFactory()
    CallFactory(owner=outsider)
    now = timezone.now()

    uses = quotas.uses_of([user.pk, outsider.pk, idle.pk], now=now)

    assert set(uses) == {user.pk, outsider.pk, idle.pk}
    for who in (user, outsider, idle):
        assert uses[who.pk] == quotas._use(who, now)
    assert (uses[user.pk]["calls"], uses[user.pk]["seconds"], uses[user.pk]["up"]) == (3, 130, 2)
    assert uses[idle.pk] == {"calls": 0, "first": None, "seconds": 0, "oldest": None, "up": 0}
