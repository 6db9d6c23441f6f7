"""The calls changelist (the history among them) at 1,000,000 rows on PostgreSQL: bounded
queries, no exact COUNT over the whole table."""

import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from tests.conftest import admin_signed_in
from tests.factories import UserFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the 1M-row check runs on PostgreSQL"
    ),
    pytest.mark.timeout(600),
]

WHOLE_TABLE_COUNT = re.compile(r'SELECT COUNT\(\*\).*FROM "calls_call"(?!.*WHERE)', re.S)


def test_history_changelist_at_a_million_rows_never_counts_the_table(client):
    owner = UserFactory()
    call_command("seed_history", "--email", owner.email, "--count", "1000000", verbosity=0)
    admin_signed_in(client, User.objects.create_superuser("admin@example.com", "admin-pw-long"))

    with CaptureQueriesContext(connection) as queries:
        response = client.get("/admin/calls/call/")

    assert response.status_code == 200
    assert b"+4477009" in response.content  # rows rendered
    assert len(queries) <= 15, [q["sql"][:120] for q in queries]
    counts = [q["sql"] for q in queries if WHOLE_TABLE_COUNT.search(q["sql"])]
    assert not counts, counts
    # Related rows come in the same query as the page, not one query per row.
    page_queries = [
        q["sql"] for q in queries if 'FROM "calls_call"' in q["sql"] and "LIMIT" in q["sql"]
    ]
    assert page_queries and all('JOIN "numbers_number"' in q for q in page_queries)
