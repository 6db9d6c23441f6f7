"""On PostgreSQL the history page is an index range scan in order: no Sort node, ever."""

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from calls.models import Call, OutcomeCounter
from calls.services import END_STATES, outcomes_counted
from core.pagination import Cursor
from history.records import history_calls, record_rows
from tests.factories import NumberFactory, UserFactory
from virtual_numbers.models import Number

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]


def plan_nodes(plan: dict) -> list[str]:
    nodes = [plan["Node Type"]]
    for child in plan.get("Plans", []):
        nodes.extend(plan_nodes(child))
    return nodes


def index_conditions(plan: dict) -> list[str]:
    found = [plan["Index Cond"]] if "Index Cond" in plan else []
    for child in plan.get("Plans", []):
        found.extend(index_conditions(child))
    return found


def unsorted_plan(query) -> dict:
    # With sorting priced out, a Sort node can only appear if no index delivers this order.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        return json.loads(query.explain(format="json"))[0]["Plan"]


@pytest.fixture(scope="module")
def loaded_user(django_db_setup, django_db_blocker):
    """30,000 calls, written once for the module (every test here only reads them: an EXPLAIN
    and a page), and emptied after it; written for each test they took a minute and a half
    of the PostgreSQL pass."""
    with django_db_blocker.unblock():
        user = _loaded_user()
        yield user
        with connection.cursor() as cursor:  # the calls and everything that points at them
            cursor.execute(
                f"TRUNCATE {Call._meta.db_table}, {OutcomeCounter._meta.db_table} CASCADE"
            )
        Number.objects.all().delete()
        User.objects.all().delete()


def _loaded_user():
    user = UserFactory()
    numbers = [NumberFactory(owner=user), NumberFactory(owner=user)]
    others = [NumberFactory() for _ in range(3)]
    now = timezone.now()
    rows = [
        Call(
            direction="inbound",
            number=(numbers + others)[i % 5],
            owner=(numbers + others)[i % 5].owner,
            caller_id="+447700900123",
            status=END_STATES[outcome],
            outcome=outcome,
            duration=i % 100,
            created_at=now - timedelta(seconds=i),
        )
        for i in range(30_000)
        for outcome in [("answered", "missed", "blocked")[i % 3]]
    ]
    Call.objects.bulk_create(rows, batch_size=5000)
    outcomes_counted(rows)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE calls_call")
    return user


@pytest.mark.parametrize("status", [None, "missed"])
@pytest.mark.parametrize("offset", [0, 3_000])
def test_history_page_uses_an_index_and_never_sorts(loaded_user, status, offset):
    from history.selectors import history_page

    records = history_calls().filter(owner=loaded_user)
    if status:
        records = records.filter(outcome=status)
    query = record_rows(records.order_by("-created_at", "-id"))[offset : offset + 50]

    nodes = plan_nodes(unsorted_plan(query))
    assert "Sort" not in nodes and "Incremental Sort" not in nodes, nodes
    assert any("Index" in n for n in nodes), nodes
    page = history_page(user=loaded_user, status=status, limit=50, offset=offset)
    assert len(page.records) == 50


@pytest.mark.parametrize("status", [None, "missed"])
def test_a_keyset_page_starts_its_index_scan_at_the_cursor(loaded_user, status):
    from history.selectors import history_page

    records = history_calls().filter(owner=loaded_user)
    if status:
        records = records.filter(outcome=status)
    deep = records.order_by("-created_at", "-id")[1_500 if status else 5_000]  # of 12,000
    cursor = Cursor.after(deep)
    query = record_rows(records.filter(cursor.older()).order_by("-created_at", "-id"))[:51]

    plan = unsorted_plan(query)

    nodes = plan_nodes(plan)
    assert "Sort" not in nodes and "Incremental Sort" not in nodes, nodes
    # The range starts at the cursor's time: rows newer than it are never read.
    assert any("created_at <=" in c for c in index_conditions(plan)), plan
    page = history_page(user=loaded_user, status=status, limit=50, offset=0, before=cursor)
    assert len(page.records) == 50
    assert (page.records[0].created_at, page.records[0].id) < (deep.created_at, deep.id)
