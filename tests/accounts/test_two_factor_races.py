"""The same code sent by parallel logins against a live threaded server: the database's
conditional UPDATE lets exactly one of them in, a TOTP code and a recovery code alike."""

import pytest

from harness.live import http
from tests.accounts.test_two_factor import code_now
from tests.factories import DEFAULT_PASSWORD, two_factor_on
from tests.numbers.test_races import race

pytestmark = pytest.mark.django_db(transaction=True)

PARALLEL = 8


@pytest.fixture
def enrolled(user, settings, clock):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = settings.RATE_LIMIT_AUTH_PER_IP = "1000/m"
    secret, codes = two_factor_on(user)
    clock.advance(seconds=30)  # the confirming code's step is spent
    return secret, codes


def logins(live_server, user, otp: str) -> list[int]:
    body = {"email": user.email, "password": DEFAULT_PASSWORD, "otp": otp}
    url = f"{live_server.url}/api/auth/login"
    return race([lambda: http("POST", url, body, timeout=60)[0] for _ in range(PARALLEL)])


def test_a_totp_code_sent_in_parallel_logs_in_once(live_server, user, enrolled):
    secret, _ = enrolled

    statuses = logins(live_server, user, code_now(secret))

    assert sorted(statuses) == [200] + [401] * (PARALLEL - 1)


def test_a_recovery_code_sent_in_parallel_logs_in_once(live_server, user, enrolled):
    _, codes = enrolled

    statuses = logins(live_server, user, codes[0])

    assert sorted(statuses) == [200] + [401] * (PARALLEL - 1)
