"""relay.platform.postgresql: a kept connection is checked (Django's CONN_HEALTH_CHECKS ping)
before a request uses it, unless a request used it without a database error less than
DATABASE_HEALTH_CHECK_FRESH seconds ago. Each block below is one request as a server runs it:
close_old_connections as it starts and as it ends (Django's request_started and
request_finished)."""

import psycopg
import pytest
from django.db import OperationalError, close_old_connections, connections

from accounts.models import User

connection = connections["default"]
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SQLite's health check sends nothing"
    ),
    pytest.mark.usefixtures("kept"),
]


@pytest.fixture
def kept(monkeypatch):
    """The connection kept between requests, as Relay keeps it (the suite's is closed after
    each request: CONN_MAX_AGE 0)."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    connection.close()
    yield
    connection.close()


@pytest.fixture
def pings(monkeypatch) -> list:
    """Each health check's ping (the real one, counted)."""
    sent = []
    check = type(connection).is_usable

    def is_usable(self):
        sent.append(self.alias)
        return check(self)

    monkeypatch.setattr(type(connection), "is_usable", is_usable)
    return sent


def request(query=lambda: User.objects.count()) -> None:
    close_old_connections()
    try:
        query()
    finally:
        close_old_connections()


def test_a_connection_used_a_moment_ago_is_not_pinged_again(settings, pings):
    settings.DATABASE_HEALTH_CHECK_FRESH = 1
    request()
    request()
    request()
    assert pings == []


def test_with_freshness_off_every_request_pings_its_kept_connection(settings, pings):
    settings.DATABASE_HEALTH_CHECK_FRESH = 0
    request()
    request()
    request()
    assert len(pings) >= 2  # every request after the one that connected


def test_a_request_after_a_database_error_is_pinged(settings, pings):
    settings.DATABASE_HEALTH_CHECK_FRESH = 60
    request()
    with pytest.raises(Exception):  # noqa: B017, PT011 - any database error
        request(lambda: connection.cursor().execute("SELECT * FROM no_such_table"))
    assert pings  # Django checked it as that request ended
    pings.clear()
    request()
    assert pings == []  # proven alive by that check


def killed_after_a_request() -> int:
    """A request, then its kept connection's server process ended (a database restart, for
    that connection): the process id it had."""
    request()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    return pid


def test_a_connection_killed_within_the_second_fails_one_request_and_is_replaced(settings):
    settings.DATABASE_HEALTH_CHECK_FRESH = 60
    pid = killed_after_a_request()

    with pytest.raises(OperationalError):
        request()
    request()  # a new connection

    assert connection.connection.info.backend_pid != pid


def test_with_freshness_off_a_killed_connection_is_replaced_before_the_request(settings):
    settings.DATABASE_HEALTH_CHECK_FRESH = 0
    pid = killed_after_a_request()

    request()

    assert connection.connection.info.backend_pid != pid
