"""Passwords are hashed with Argon2id at the configured parameters, and a hash with other
parameters (Django's defaults, before Relay set its own) is upgraded on the next successful
login, never on a failed one."""

from __future__ import annotations

import subprocess

import pytest
from django.contrib.auth.hashers import Argon2PasswordHasher

from accounts.models import User
from harness.live import assert_refused_at_start_up, child_environ
from harness.live import manage as manage_py
from tests.factories import UserFactory

PASSWORD = "a-long-and-unusual-passphrase"
OWASP_MINIMUM = "$argon2id$v=19$m=19456,t=2,p=1$"
DJANGO_DEFAULTS = "$argon2id$v=19$m=102400,t=2,p=8$"


def parameters(encoded: str) -> str:
    """`$argon2id$v=19$m=...,t=...,p=...$` of an `argon2$...` hash."""
    algorithm, variety, version, params, _salt, _hash = encoded.split("$")
    assert algorithm == "argon2"
    return f"${variety}${version}${params}$"


def login(api_client, email: str, password: str):
    return api_client.post("/api/auth/login", {"email": email, "password": password}, "json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("time_cost", "memory_kib", "lanes"),
    [(2, 19456, 1), (3, 12288, 1)],  # OWASP's minimum, and an equivalent it lists
)
def test_a_registered_users_hash_is_argon2id_at_exactly_the_configured_parameters(
    api_client, real_hashers, time_cost, memory_kib, lanes
):
    real_hashers.PASSWORD_ARGON2_TIME_COST = time_cost
    real_hashers.PASSWORD_ARGON2_MEMORY_KIB = memory_kib
    real_hashers.PASSWORD_ARGON2_PARALLELISM = lanes

    response = api_client.post(
        "/api/auth/register", {"email": "ada@example.com", "password": PASSWORD}, "json"
    )

    assert response.status_code == 201
    encoded = User.objects.get(email="ada@example.com").password
    assert parameters(encoded) == f"$argon2id$v=19$m={memory_kib},t={time_cost},p={lanes}$"
    assert login(api_client, "ada@example.com", PASSWORD).status_code == 200
    assert User.objects.get(email="ada@example.com").password == encoded  # nothing to upgrade


@pytest.fixture
def user_with_an_old_hash(db, real_hashers) -> User:
    """A user whose password was hashed at Django's default Argon2 parameters."""
    user = UserFactory(password=None)
    django_default = Argon2PasswordHasher()
    user.password = django_default.encode(PASSWORD, django_default.salt())
    user.save(update_fields=["password"])
    assert parameters(user.password) == DJANGO_DEFAULTS
    return user


def test_an_old_hash_is_upgraded_on_the_next_successful_login(api_client, user_with_an_old_hash):
    response = login(api_client, user_with_an_old_hash.email, PASSWORD)

    assert response.status_code == 200
    user_with_an_old_hash.refresh_from_db()
    assert parameters(user_with_an_old_hash.password) == OWASP_MINIMUM
    assert user_with_an_old_hash.check_password(PASSWORD)
    assert login(api_client, user_with_an_old_hash.email, PASSWORD).status_code == 200


def test_a_wrong_password_leaves_an_old_hash_untouched(api_client, user_with_an_old_hash):
    before = user_with_an_old_hash.password

    response = login(api_client, user_with_an_old_hash.email, "not-the-password")

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_credentials"
    user_with_an_old_hash.refresh_from_db()
    assert user_with_an_old_hash.password == before


# --- start-up: the parameters come from the environment, and a bad one stops start-up --------
def manage(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """manage.py with Relay's own settings, the defaults of every PASSWORD_* variable (a
    developer's shell may export some), plus `env`."""
    environ = {k: v for k, v in child_environ().items() if not k.startswith("PASSWORD_")}
    environ.update(
        SECRET_KEY="password-settings-test-secret-key-" + "x" * 30,
        DATABASE_URL="sqlite:////tmp/relay-password-settings-test.sqlite3",
        **env,
    )
    return manage_py(*argv, env=environ)


def hash_made_at_start_up(**env: str) -> str:
    """A hash that a freshly started Relay makes, with `env` set."""
    code = "from django.contrib.auth.hashers import make_password; print(make_password('x'))"
    result = manage("shell", "--no-imports", "-c", code, **env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_with_no_variable_set_passwords_are_hashed_at_owasps_minimum():
    assert parameters(hash_made_at_start_up()) == OWASP_MINIMUM


def test_the_parameters_come_from_the_environment():
    encoded = hash_made_at_start_up(
        PASSWORD_ARGON2_TIME_COST="1",
        PASSWORD_ARGON2_MEMORY_KIB="47104",
        PASSWORD_ARGON2_PARALLELISM="2",
    )

    assert parameters(encoded) == "$argon2id$v=19$m=47104,t=1,p=2$"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PASSWORD_ARGON2_TIME_COST", "0"),
        ("PASSWORD_ARGON2_TIME_COST", "two"),
        ("PASSWORD_ARGON2_MEMORY_KIB", "19MiB"),
        ("PASSWORD_ARGON2_MEMORY_KIB", "-1"),
        ("PASSWORD_ARGON2_PARALLELISM", "0"),
        ("PASSWORD_ARGON2_PARALLELISM", "1.5"),
        ("PASSWORD_HASH_CONCURRENCY", "0"),
        ("PASSWORD_HASH_CONCURRENCY", "many"),
        ("PASSWORD_HASH_WAIT_SECONDS", "-1"),
        ("PASSWORD_HASH_WAIT_SECONDS", "2s"),
        ("PASSWORD_HASH_WAIT_SECONDS", "nan"),
        ("PASSWORD_HASH_WAIT_SECONDS", "31"),
        ("PASSWORD_HASH_QUEUE_MAX", "-1"),
        ("PASSWORD_HASH_QUEUE_MAX", "ten"),
    ],
)
def test_a_bad_password_hashing_setting_stops_start_up_with_one_line(name, value):
    assert_refused_at_start_up(manage("check", **{name: value}), name)


def test_memory_below_eight_kib_a_lane_stops_start_up():
    result = manage("check", PASSWORD_ARGON2_PARALLELISM="4", PASSWORD_ARGON2_MEMORY_KIB="16")

    assert result.returncode != 0
    assert result.stderr.strip().startswith("Relay cannot start: PASSWORD_ARGON2_MEMORY_KIB")
    assert "at least 8 per lane" in result.stderr
