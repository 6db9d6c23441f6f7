"""What a batch of submits costs in round trips (issue 40): a fixed number to the database
and one to Redis, whatever the batch's size, its owners, their numbers, webhooks and
statusCallbacks. Counts, not timings: they hold on a noisy machine. Queries are counted by
pytest-django (the statements Django sends; a transaction's BEGIN and COMMIT are one more
each on PostgreSQL, where psycopg sends them itself), Redis round trips by harness.roundtrips
(on the embedded default nothing goes to Redis, and the bound holds trivially)."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django_tasks_db.models import DBTaskResult

from accounts.models import DialRefusal
from calls.models import Call
from core import ratelimit
from core.errors import ApplicationError
from harness.roundtrips import count_redis
from realtime.services import Submit, calls_submit
from tests.factories import NumberFactory, UserFactory
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

# One read of the owners (their numbers, the callIds they used, their webhooks); under the
# owners' locks their use, the calls, their queued events, the counters, and every task in
# one INSERT: 7 statements, and the transaction's BEGIN and COMMIT.
BATCH_QUERIES = 9
# With webhooks or statusCallbacks: their deliveries (whose statusCallbacks come with the
# calls, and the webhooks with the owners, not read again), their tasks in the same INSERT
# as the steps': 8 statements in all.
DELIVERIES_QUERIES = 1
# Refusals of the policy or a quota are counted for fraud review after the commit, together:
# a transaction of their own (BEGIN, COMMIT), the refusals, their count per user in the hour.
REFUSAL_QUERIES = 4
# Submits whose callId was used already: the rows of those calls, to answer with.
RESEND_QUERIES = 1


def redis_cache() -> bool:
    """Whether the rate limits live in Redis; if so, with its connection open already (a
    connection's opening is not the batch's round trip)."""
    ratelimit.hit("warm-up", "round-trips", "1000/s")
    return isinstance(caches["default"], RedisCache)


def owners(count: int, *, webhook: bool, unmetered: bool = True) -> list:
    users = [UserFactory(unmetered=unmetered) for _ in range(count)]
    for user in users:
        NumberFactory(owner=user)
        if webhook:
            WebhookEndpoint.objects.create(
                user=user,
                url="https://hooks.example.com/relay",
                events=["call_status"],
                secret_encrypted="x",
                secret_id="whs_test",
            )
    return users


def batch(users: list, calls_each: int, *, callback: bool = True) -> list[Submit]:
    return [
        Submit(
            user=user,
            data={
                "type": "call",
                "callId": f"c{n}",
                "to": "+442079460120",
                "message": "Your parcel is on its way.",
                **({"statusCallback": f"https://status.example.com/{n}"} if callback else {}),
            },
            pushes=[],
        )
        for n in range(calls_each)
        for user in users
    ]


@pytest.mark.parametrize(
    ("owner_count", "calls_each"), [(1, 1), (5, 1), (10, 4)], ids=["1", "5", "40"]
)
@pytest.mark.parametrize("webhook", [False, True], ids=["plain", "webhooks"])
def test_a_batch_costs_the_same_round_trips_whatever_its_size(
    owner_count, calls_each, webhook, django_assert_max_num_queries
):
    users = owners(owner_count, webhook=webhook)
    submits = batch(users, calls_each, callback=webhook)
    queries = BATCH_QUERIES + (DELIVERIES_QUERIES if webhook else 0)

    in_redis = redis_cache()
    with django_assert_max_num_queries(queries), count_redis() as redis:
        outcomes = calls_submit(submits=submits)

    assert [created for _, created in outcomes] == [True] * len(submits)
    # Every owner's rate limit in one pipeline (MULTI ... EXEC), where Redis is the cache.
    assert redis.round_trips == (1 if in_redis else 0), redis.names
    # All of it written: the calls, a step each, and (with webhooks) two deliveries each:
    # the statusCallback's and the webhook's.
    calls = len(submits)
    assert Call.objects.count() == calls
    deliveries = WebhookDelivery.objects.count()
    assert deliveries == (2 * calls if webhook else 0)
    assert DBTaskResult.objects.count() == calls + deliveries


def test_calls_sent_again_cost_one_read_and_nothing_per_call(django_assert_max_num_queries):
    """A batch whose callIds were used already (a client that sends again what it is not
    sure arrived) reads those calls once, and writes nothing for them."""
    users = owners(5, webhook=False)
    first = calls_submit(submits=batch(users, 2, callback=False))
    again = batch(users, 3, callback=False)  # c0 and c1 of each owner again, and a new c2

    with django_assert_max_num_queries(BATCH_QUERIES + RESEND_QUERIES):
        outcomes = calls_submit(submits=again)

    assert [created for _, created in outcomes] == [False] * 10 + [True] * 5
    assert {call.pk for call, _ in outcomes[:10]} == {call.pk for call, _ in first}
    assert Call.objects.count() == 15


def test_a_batch_with_refusals_costs_no_more(django_assert_max_num_queries):
    """Refusals cost nothing per submit either: a bad frame, a `from` not the owner's, a
    destination the policy refuses, and quotas used up (the free plan's calls at once)."""
    users = owners(5, webhook=False, unmetered=False)
    submits = batch(
        users, 4, callback=False
    )  # 3 calls at once on the free plan: each owner's 4th refused
    submits[0].data["to"] = "+8613800138000"  # a country not allowed
    submits[1].data["from"] = "+442079460999"  # not one of the owner's numbers
    submits[2].data["message"] = ""  # invalid

    in_redis = redis_cache()
    with django_assert_max_num_queries(BATCH_QUERIES + REFUSAL_QUERIES), count_redis() as redis:
        outcomes = calls_submit(submits=submits)

    refused = [o.code.value for o in outcomes if isinstance(o, ApplicationError)]
    assert sorted(refused) == sorted(
        ["destination_not_allowed", "invalid_request", "invalid_request"]
        + ["quota_exceeded"] * 2  # owners 3 and 4; the first three lost a call already
    ), refused
    assert DialRefusal.objects.count() == 3
    assert redis.round_trips == (1 if in_redis else 0), redis.names
