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


@pytest.fixture
def prepared_by_psycopg(settings):
    """DATABASE_PREPARED_STATEMENTS=psycopg as relay.settings sets it up (server-side binding
    and psycopg's threshold in the connection's options), on a new connection."""
    options = connection.settings_dict["OPTIONS"]
    kept = dict(options)
    settings.DATABASE_PREPARED_STATEMENTS = "psycopg"
    options.update(server_side_binding=True, prepare_threshold=settings.DATABASE_PREPARE_THRESHOLD)
    connection.close()
    yield
    options.clear()
    options.update(kept)
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_left_to_psycopg_each_statement_is_prepared_on_its_thresholds_run(
    prepared_by_psycopg, client_jwt, settings
):
    client = client_jwt
    threshold = settings.DATABASE_PREPARE_THRESHOLD
    assert threshold == 5  # psycopg's own default, Relay's too

    for _ in range(threshold - 1):
        assert client.get("/api/user/me").status_code == 200
    assert prepared_runs() == 0  # below the threshold: bound on the server, not prepared

    for _ in range(3):
        assert client.get("/api/user/me").status_code == 200
    assert prepared_runs() >= 2  # psycopg's own, with no cursor of Relay's
    assert not connection.connection.cursor_factory.__name__.startswith("Prepared")


def test_the_setting_takes_true_false_or_psycopg_and_refuses_anything_else():
    import subprocess
    import sys

    from harness.live import ROOT, child_environ

    def read(value: str) -> subprocess.CompletedProcess:
        env = child_environ(
            DATABASE_PREPARED_STATEMENTS=value,
            DATABASE_URL="postgres://postgres@127.0.0.1:5432/relay_unused",
            SECRET_KEY="x" * 50,
            DJANGO_SETTINGS_MODULE="relay.settings",
        )
        code = (
            "from django.conf import settings as s; import django; django.setup(); "
            "print(s.DATABASE_PREPARED_STATEMENTS, "
            "s.DATABASES['default']['OPTIONS'].get('server_side_binding'))"
        )
        return subprocess.run(  # noqa: S603 - our own settings
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip

    assert read("true").stdout.split() == ["True", "None"]
    assert read("off").stdout.split() == ["False", "None"]
    assert read("psycopg").stdout.split() == ["psycopg", "True"]
    refused = read("maybe")
    assert refused.returncode != 0
    assert "DATABASE_PREPARED_STATEMENTS must be true, false or psycopg" in refused.stderr
