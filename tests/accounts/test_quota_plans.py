"""On PostgreSQL a user's quota use reads the rows of the day (and the calls up), never every
call the user made: GET /api/user/me reads it on every request, and a user's calls add up
over months."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts import quotas
from calls.models import Call
from calls.states import CallState

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]

OLD_CALLS = 3000


def rows_read(plan: dict, table: str) -> int:
    """The rows the plan's scans of `table` returned, over all their loops."""
    read = 0
    if plan.get("Relation Name") == table:
        read += plan["Actual Rows"] * plan["Actual Loops"]
    for child in plan.get("Plans", []):
        read += rows_read(child, table)
    return read


def test_the_use_of_a_user_with_months_of_calls_reads_only_the_days_rows(user):
    now = timezone.now()
    old = [
        Call(
            owner=user,
            call_id=f"old-{n}",
            to="+442079460120",
            message="hi",
            caller_id="+442079460000",
            status=CallState.COMPLETED,
            answered_at=now - timedelta(days=30, seconds=n),
            duration=10,
            ended_at=now - timedelta(days=30, seconds=n),
        )  # fmt: skip
        for n in range(OLD_CALLS)
    ]
    Call.objects.bulk_create(old)
    Call.objects.filter(call_id__startswith="old-").update(created_at=now - timedelta(days=30))
    for n in range(3):
        Call.objects.create(owner=user, call_id=f"new-{n}", to="+442079460120",
                                   message="hi", caller_id="+442079460000")  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE calls_call")

    query = quotas._use_query(owner=user.pk, since=now - quotas.WINDOW)
    plan = json.loads(query.explain(format="json", analyze=True))[0]["Plan"]

    assert quotas._use(user, now)["calls"] == 3
    # Ten figures of three new calls: each reads at most those, whatever the month held.
    assert rows_read(plan, "calls_call") <= 10 * 3
