"""What an authenticated request costs before its view's own work, in round trips (issue 40):
one database query for the credentials, whichever they are, and for GET /api/user/me the
whole answer in that one query (the quota use and the second factor ride along). The touch
of a session's last_seen, once per SESSION_TOUCH_INTERVAL, is the one documented extra.
Counts, not timings: pytest-django counts the queries, harness/roundtrips.py the Redis commands.
That an ended session, a replaced key or a changed password is refused at once on another
process: tests/accounts/test_ended_credentials_across_processes.py."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory

from accounts import selectors
from accounts.models import TotpDevice
from accounts.serializers import MeOutput
from calls.models import Call
from calls.states import CallState
from core.fields import represent
from core.viewsets import ResourceViewSet
from harness.roundtrips import count_redis
from tests.conftest import api_key_client, jwt_client
from tests.factories import CallFactory, NumberFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["jwt", "api_key"])
def caller(request, user, login) -> APIClient:
    """`user`'s client, by each way to authenticate: its JWT (a session seen just now, so no
    touch is due) and its API key."""
    return jwt_client(login.token) if request.param == "jwt" else api_key_client(user.api_key)


def with_use_and_a_factor(user) -> None:
    """Give `user` something in every figure of /me: calls today (one answered, one up, one
    ended yesterday) and a confirmed second factor."""
    now = timezone.now()
    answered = CallFactory(
        owner=user,
        status=CallState.COMPLETED,
        answered_at=now - timedelta(hours=2),
        duration=42,
        ended_at=now - timedelta(hours=1),
    )
    Call.objects.filter(pk=answered.pk).update(created_at=now - timedelta(hours=2))
    old = CallFactory(owner=user, status=CallState.COMPLETED)
    Call.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=2))
    CallFactory(owner=user, status=CallState.RINGING)
    TotpDevice.objects.create(user=user, secret_ciphertext="-", confirmed_at=now)


# --- GET /api/user/me ---------------------------------------------------------------------------
def test_me_is_one_database_round_trip(caller, django_assert_max_num_queries):
    caller.get("/api/user/me")  # the first request of a process compiles the query

    with django_assert_max_num_queries(1):
        response = caller.get("/api/user/me")

    assert response.status_code == 200


def test_me_with_calls_and_a_factor_is_still_one_round_trip_and_says_what_separate_reads_say(
    caller, user, django_assert_max_num_queries
):
    with_use_and_a_factor(user)
    caller.get("/api/user/me")

    with django_assert_max_num_queries(1):
        body = caller.get("/api/user/me").json()

    # The reads of their own (a user without profile_extras) give the same figures.
    user.refresh_from_db()
    assert body == represent(MeOutput, selectors.user_profile(user=user))
    assert body["quotas"]["callsPerDay"]["used"] == 2
    assert body["quotas"]["callSecondsPerDay"]["used"] == 42
    assert body["quotas"]["concurrentCalls"]["used"] == 1
    assert body["twoFactor"] is True


def test_me_sends_nothing_to_redis(caller):
    caller.get("/api/user/me")  # connections opened, outside the count

    with count_redis() as redis_sent:
        assert caller.get("/api/user/me").status_code == 200

    assert redis_sent.commands == 0, redis_sent.names


def test_a_session_due_its_touch_pays_one_update_more(login, clock, django_assert_num_queries):
    client = jwt_client(login.token)
    client.get("/api/user/me")
    clock.advance(seconds=settings.SESSION_TOUCH_INTERVAL + 1)

    with django_assert_num_queries(2) as queries:
        assert client.get("/api/user/me").status_code == 200
    with django_assert_num_queries(1):
        assert client.get("/api/user/me").status_code == 200

    assert queries.captured_queries[1]["sql"].startswith("UPDATE")


# --- every other authenticated request --------------------------------------------------------
class Nothing(ResourceViewSet):
    # An authenticated action whose own work reads nothing: what it costs is authentication.
    def list(self, request):
        return Response({"profile": hasattr(request.user, "profile_extras")})


class NothingButTheProfile(Nothing):
    profile_actions = frozenset({"list"})


@pytest.mark.parametrize("view_set", [Nothing, NothingButTheProfile])
def test_authentication_alone_is_one_round_trip_by_jwt_and_by_api_key(
    view_set, user, login, django_assert_num_queries
):
    view = view_set.as_view({"get": "list"})
    factory = APIRequestFactory()
    credentials = [
        {"HTTP_AUTHORIZATION": f"Bearer {login.token}"},
        {"HTTP_X_API_KEY": user.api_key},
    ]
    for headers in credentials:
        view(factory.get("/", **headers))

        with django_assert_num_queries(1), count_redis() as redis_sent:
            response = view(factory.get("/", **headers))

        # Only an action that shows the profile has it read (at no extra round trip).
        assert (response.status_code, response.data) == (
            200,
            {"profile": view_set is NothingButTheProfile},
        )
        assert redis_sent.commands == 0, redis_sent.names


@pytest.mark.parametrize("path", ["/api/numbers", "/api/history", "/api/calls"])
def test_other_endpoints_pay_one_round_trip_before_their_own_work(
    caller, user, path, django_assert_num_queries
):
    # The view's own work, measured alone (DRF's forced authentication reads nothing), plus
    # one query for the credentials.
    NumberFactory(owner=user)
    forced = APIClient()
    forced.force_authenticate(user=user)
    forced.get(path)
    caller.get(path)
    with CaptureQueriesContext(connection) as own_work:
        forced.get(path)
    own = len(own_work.captured_queries)

    with django_assert_num_queries(own + 1):
        assert caller.get(path).status_code == 200
