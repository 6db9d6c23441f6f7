"""relay.platform.postgresql: the statements core.platform.compiled runs on every request (the
session
behind a JWT, with the user's quotas) are prepared once per connection and run prepared after that,
still counted by Django's instrumentation; DATABASE_PREPARED_STATEMENTS=false prepares
nothing; a statement prepared in a transaction that rolled back is still good after it."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts import selectors
from accounts.models import User

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite has no prepared statements to keep"
)

SESSION_TABLE = "accounts_loginsession"


def prepared_runs(table: str = SESSION_TABLE) -> int:
    """How many times this connection ran a prepared statement that reads `table`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            [f'%"{table}"%'],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_me_runs_its_one_statement_prepared_and_it_is_still_counted(client_jwt, settings):
    settings.DATABASE_PREPARED_STATEMENTS = True
    before = prepared_runs()

    with CaptureQueriesContext(connection) as captured:
        for _ in range(3):
            assert client_jwt.get("/api/user/me").status_code == 200

    assert prepared_runs() - before == 3
    # One statement a request, shown with its values as Django shows its own.
    assert len(captured) == 3
    assert all(f'"{SESSION_TABLE}"."id" = ' in query["sql"] for query in captured), captured


@pytest.mark.django_db
def test_turned_off_nothing_is_prepared(client_jwt, settings):
    settings.DATABASE_PREPARED_STATEMENTS = False
    before = prepared_runs()

    for _ in range(3):
        assert client_jwt.get("/api/user/me").status_code == 200

    assert prepared_runs() == before


@pytest.mark.django_db(transaction=True)
def test_a_statement_prepared_in_a_rolled_back_transaction_runs_after_it(user, settings):
    settings.DATABASE_PREPARED_STATEMENTS = True
    connection.close()  # a new connection: nothing prepared on it yet
    digest, now = user.api_key_digest, timezone.now()

    with pytest.raises(IntegrityError), transaction.atomic():
        assert selectors.user_by_api_key_digest(digest=digest, profile_at=now).pk == user.pk
        User.objects.create(email=user.email)  # the same address: the transaction fails

    for _ in range(2):
        assert selectors.user_by_api_key_digest(digest=digest, profile_at=now).pk == user.pk
    # psycopg forgets what a failed transaction prepared and prepares it again: run prepared.
    assert prepared_runs("accounts_user") >= 2
