"""Sign-up the operator controls and what operators see of fraud (issue 27): REGISTRATION_OPEN,
`manage.py createuser`, the settings of the dialing policy and the plans, the flag on a user
whose refusals climb, and the refusals' purge."""

import io
import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from accounts.models import DialRefusal, User
from calls.models import Call
from harness import live
from tests.conftest import jwt_client
from tests.factories import DEFAULT_PASSWORD

PASSWORD = "a-long-and-unusual-passphrase"


# --- REGISTRATION_OPEN ----------------------------------------------------------------------
@pytest.mark.django_db
def test_closed_registration_answers_403_and_creates_nothing(settings, api_client):
    settings.REGISTRATION_OPEN = False

    response = api_client.post(
        "/api/auth/register", {"email": "eve@example.com", "password": PASSWORD}, format="json"
    )

    assert response.status_code == 403
    assert response.json() == {
        "error": "Sign-up is closed on this server; ask its operator for an account.",
        "code": "registration_closed",
    }
    assert not User.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{}, {"email": 5}, "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]"])
def test_closed_registration_says_only_that_whatever_the_body(settings, api_client, body):
    settings.REGISTRATION_OPEN = False

    response = api_client.post("/api/auth/register", body, format="json")

    assert (response.status_code, response.json()["code"]) == (403, "registration_closed")


@pytest.mark.django_db
def test_login_still_works_while_registration_is_closed(settings, api_client, user):
    settings.REGISTRATION_OPEN = False

    response = api_client.post(
        "/api/auth/login", {"email": user.email, "password": DEFAULT_PASSWORD}, format="json"
    )

    assert response.status_code == 200, response.content


# --- manage.py createuser ---------------------------------------------------------------------
def createuser(monkeypatch, stdin: str, *args: str) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("createuser", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_createuser_makes_a_user_who_can_log_in(settings, monkeypatch, api_client):
    settings.REGISTRATION_OPEN = False

    out = createuser(
        monkeypatch, f"{PASSWORD}\n", "--email", "Staff.Made@Example.com", "--password-stdin"
    )

    assert out.strip() == "Created staff.made@example.com (plan free)."
    assert PASSWORD not in out
    user = User.objects.get(email="staff.made@example.com")
    assert user.api_key_digest  # an API key, like a registered user's
    login = api_client.post(
        "/api/auth/login", {"email": "staff.made@example.com", "password": PASSWORD}, format="json"
    )
    assert login.status_code == 200, login.content
    assert jwt_client(login.json()["token"]).get("/api/user/me").status_code == 200


@pytest.mark.django_db
def test_createuser_puts_the_user_on_a_plan_of_settings(settings, monkeypatch):
    settings.PLANS = {**settings.PLANS, "pro": {**settings.PLANS["free"], "numbers": 20}}

    createuser(
        monkeypatch, PASSWORD, "--email", "pro@example.com", "--password-stdin", "--plan", "pro"
    )

    user = User.objects.get(email="pro@example.com")
    assert user.plan == "pro"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("stdin", "args", "says"),
    [
        ("", ["--email", "a@example.com"], "no password on standard input"),
        ("short\n", ["--email", "a@example.com"], "too short"),
        (f"{PASSWORD}\n", ["--email", "not-an-address"], "valid email"),
        (f"{PASSWORD}\n", ["--email", "a@example.com", "--plan", "gold"], "no plan 'gold'"),
    ],
)
def test_createuser_refuses_bad_input_with_one_message(monkeypatch, stdin, args, says):
    with pytest.raises(CommandError) as refused:
        createuser(monkeypatch, stdin, *args, "--password-stdin")

    assert says in str(refused.value)
    assert not User.objects.exists()


@pytest.mark.django_db
def test_createuser_refuses_a_taken_address_in_any_case(monkeypatch, user):
    with pytest.raises(CommandError) as refused:
        createuser(monkeypatch, PASSWORD, "--email", user.email.upper(), "--password-stdin")

    assert "already registered" in str(refused.value)
    assert User.objects.count() == 1


def test_createuser_needs_the_password_on_stdin_never_on_the_command_line():
    with pytest.raises(CommandError):
        call_command("createuser", "--email", "a@example.com")


# --- settings -------------------------------------------------------------------------------
GOOD = {
    "SECRET_KEY": "settings-test-secret-key-" + "x" * 40,
    "DATABASE_URL": "sqlite:////tmp/relay-settings-test.sqlite3",
}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DIAL_ALLOWED_COUNTRIES", "UK"),  # GB's code is GB
        ("DIAL_ALLOWED_COUNTRIES", "GB,France"),
        ("DIAL_ALLOWED_COUNTRIES", ","),
        ("DIAL_ALLOW_PREMIUM", "sometimes"),
        ("REGISTRATION_OPEN", "perhaps"),
        ("FRAUD_FLAG_REFUSALS_PER_HOUR", "0"),
        ("PLANS", "free,Gold Plan"),
        ("PLAN_FREE_CALLS_PER_DAY", "-1"),
        ("PLAN_FREE_CALLS_PER_DAY", "lots"),
        ("PLAN_FREE_CALL_SECONDS_PER_DAY", "1e3"),
        ("PLAN_FREE_CONCURRENT_CALLS", "99999999999"),
        ("PLAN_FREE_NUMBERS", "unlimited"),  # only the quotas may be
    ],
)
def test_a_wrong_policy_or_plan_setting_stops_start_up_with_one_line(name, value):
    result = live.manage("check", env=live.child_environ(**{**GOOD, name: value}))

    live.assert_refused_at_start_up(result, name)


def test_plans_beyond_free_take_frees_limits_unless_set(tmp_path):
    script = (
        "from django.conf import settings; p = settings.PLANS; "
        "print(p['pro']['calls_per_day'], p['pro']['concurrent_calls'], p['free']['calls_per_day'],"
        " p['pro']['call_seconds_per_day'], settings.PLAN_NUMBER_LIMITS['pro'])"
    )
    env = live.child_environ(
        **GOOD,
        PLANS="free,pro",
        PLAN_FREE_CALLS_PER_DAY="20",
        PLAN_PRO_CONCURRENT_CALLS="10",
        PLAN_PRO_CALL_SECONDS_PER_DAY="unlimited",
    )

    result = live.manage("shell", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["20", "10", "20", "None", "5"]


# --- the fraud flag -------------------------------------------------------------------------
def refuse(client, n: int):
    return client.post(
        "/api/calls", {"callId": f"r{n}", "to": "+449012345678", "message": "Hi"}, format="json"
    )


@pytest.mark.django_db
def test_a_user_is_flagged_once_their_refusals_in_an_hour_reach_the_threshold(
    settings, user, client_jwt, caplog
):
    settings.FRAUD_FLAG_REFUSALS_PER_HOUR = 3
    # Two refusals of yesterday count for nothing.
    for _ in range(2):
        DialRefusal.objects.create(
            user=user, kind="destination", reason="country", at=timezone.now() - timedelta(hours=2)
        )
    with caplog.at_level(logging.WARNING, logger="accounts.services"):
        refuse(client_jwt, 1)
        refuse(client_jwt, 2)
        user.refresh_from_db()
        assert user.fraud_flagged_at is None

        refuse(client_jwt, 3)
        refuse(client_jwt, 4)

    user.refresh_from_db()
    assert user.fraud_flagged_at is not None
    flagged = [r for r in caplog.records if "flagged for fraud review" in r.getMessage()]
    assert len(flagged) == 1  # once, however many refusals follow
    assert "+449012345678" not in caplog.text
    assert not Call.objects.exists()


@pytest.mark.django_db
def test_refusals_older_than_a_week_are_purged(user):
    now = timezone.now()
    old = DialRefusal.objects.create(
        user=user, kind="quota", reason="calls_per_day", at=now - timedelta(days=8)
    )
    kept = DialRefusal.objects.create(
        user=user, kind="quota", reason="calls_per_day", at=now - timedelta(days=6)
    )
    out = io.StringIO()

    call_command("purge_expired", stdout=out)

    assert list(DialRefusal.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not DialRefusal.objects.filter(pk=old.pk).exists()
    assert "1 old refusal(s)" in out.getvalue()
