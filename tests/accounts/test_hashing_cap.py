"""The cap on password hashing, shared by every process of the machine: with every slot
taken and no room to wait (PASSWORD_HASH_WAIT_SECONDS=0: nothing fits in the wait), each
request path that hashes or checks a password or PIN answers 503 service_unavailable with
Retry-After at once, writes nothing, and works again as soon as a slot is free. (Waiting
for a slot in the queue: test_hashing_queue.py.)

The tests hold the product's own slot (core.passwords.password_hashing_slot) with the cap set
to 1, exactly as a concurrent request inside its hash would.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from django.contrib.auth.hashers import check_password

from accounts.models import LoginSession, User
from captcha.models import CaptchaToken
from core.passwords import password_hashing_slot
from harness.live import ROOT, relay_env
from tests.factories import DEFAULT_PASSWORD, NumberFactory, UserFactory
from virtual_numbers.models import Number, PinFailure

BUSY = {
    "error": "The server is busy checking other passwords. Try again in a second.",
    "code": "service_unavailable",
}


@pytest.fixture
def cap_of_one(settings, tmp_path):
    """One slot, no room to wait, and a queue of this test's own: the queue takes the time a
    slot is held for a hash and sizes Retry-After by it, so another test's long hold of the
    session's queue would change the Retry-After these tests expect."""
    settings.PASSWORD_HASH_CONCURRENCY = 1
    settings.PASSWORD_HASH_WAIT_SECONDS = 0
    settings.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "hashing-slots"
    return settings


def login(api_client, email: str, password: str = DEFAULT_PASSWORD):
    return api_client.post("/api/auth/login", {"email": email, "password": password}, "json")


def assert_busy(response) -> None:
    assert response.status_code == 503
    assert response.json() == BUSY
    assert response["Retry-After"] == "1"


def fastest_of_each(*actions, rounds: int = 5) -> list[float]:
    """The shortest of `rounds` runs of each of `actions`, in seconds, the actions taking
    turns: the shortest run is the least noisy measure of what an action costs on a machine
    that other work keeps busy, and taking turns measures every action through the same
    moments, so that load which comes or goes (another test under pytest-xdist) weighs on
    them all alike instead of on one phase of the test."""
    timings: list[list[float]] = [[] for _ in actions]
    for _ in range(rounds):
        for action, runs in zip(actions, timings, strict=True):
            started = time.perf_counter()
            action()
            runs.append(time.perf_counter() - started)
    return [min(runs) for runs in timings]


@pytest.mark.django_db
def test_a_login_is_refused_at_once_while_every_slot_is_taken_and_succeeds_after(
    api_client, real_hashers, cap_of_one
):
    user = UserFactory()
    encoded = user.password
    responses = []

    with password_hashing_slot():  # the only slot: a concurrent login would be inside it
        # The baseline, one hash, is measured beside the refused logins: a refusal that
        # waited for a slot or hashed first would cost at least that much.
        one_hash, refused = fastest_of_each(
            lambda: check_password(DEFAULT_PASSWORD, encoded),
            lambda: responses.append(login(api_client, user.email)),
            rounds=5,
        )

    assert len(responses) == 5
    for response in responses:
        assert_busy(response)
    assert refused < one_hash / 2, (refused, one_hash)  # no waiting for a slot, no hash
    assert not LoginSession.objects.exists()
    assert login(api_client, user.email).status_code == 200
    assert LoginSession.objects.filter(user=user).count() == 1


@pytest.mark.django_db
def test_a_wrong_password_is_refused_too_before_it_is_checked(api_client, user, cap_of_one):
    with password_hashing_slot():
        response = login(api_client, user.email, "not-the-password")

    assert_busy(response)
    assert login(api_client, user.email, "not-the-password").status_code == 401


@pytest.mark.django_db
def test_a_registration_refused_for_hashing_creates_nothing(api_client, cap_of_one):
    body = {"email": "ada@example.com", "password": "a-long-and-unusual-passphrase"}

    with password_hashing_slot():
        response = api_client.post("/api/auth/register", body, "json")

    assert_busy(response)
    assert not User.objects.exists()
    assert not LoginSession.objects.exists()
    assert api_client.post("/api/auth/register", body, "json").status_code == 201


@pytest.mark.django_db
def test_a_pin_change_refused_for_hashing_changes_and_counts_nothing(client_jwt, user, cap_of_one):
    number = NumberFactory(owner=user)  # PIN 1234
    url = f"/api/numbers/{number.pk}/pin"

    with password_hashing_slot():
        right = client_jwt.put(url, {"currentPin": "1234", "newPin": "5678"}, "json")
        wrong = client_jwt.put(url, {"currentPin": "9999", "newPin": "5678"}, "json")

    assert_busy(right)
    assert_busy(wrong)
    number.refresh_from_db()
    assert check_password("1234", number.pin_hash)
    assert not PinFailure.objects.exists()
    assert client_jwt.put(url, {"currentPin": "1234", "newPin": "5678"}, "json").status_code == 200


@pytest.mark.django_db
def test_a_number_creation_refused_for_hashing_keeps_the_captcha_token(
    client_jwt, inventory, captcha_token, cap_of_one
):
    body = {"alias": "Work", "pin": "1234", "captchaToken": captcha_token()}

    with password_hashing_slot():
        response = client_jwt.post("/api/numbers", body, "json")

    assert_busy(response)
    assert not Number.objects.exists()
    assert CaptchaToken.objects.get(pk=body["captchaToken"]).used_at is None
    assert client_jwt.post("/api/numbers", body, "json").status_code == 201


@pytest.mark.django_db
def test_the_admin_login_form_is_refused_in_the_error_shape(client, cap_of_one):
    User.objects.create_superuser("boss@example.com", "a-long-admin-passphrase")
    form = {"username": "boss@example.com", "password": "a-long-admin-passphrase"}

    with password_hashing_slot():
        response = client.post("/admin/login/", form)

    assert_busy(response)
    assert client.post("/admin/login/", form).status_code == 302  # logged in


NEW_PASSWORD = "another-long-pass-phrase"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("form", "path"),
    [
        ("add a user", "/admin/accounts/user/add/"),
        ("set a user's password", "/admin/accounts/user/{user}/password/"),
        ("change one's own password", "/admin/password_change/"),
    ],
)
def test_the_admins_password_forms_are_refused_in_the_error_shape(
    staff_client, cap_of_one, form, path
):
    user = UserFactory(email="staffed@example.com")
    fields = {
        "email": "new@example.com",
        "old_password": "admin-password-long",  # staff_client's (tests/conftest.py)
        "password1": NEW_PASSWORD,
        "password2": NEW_PASSWORD,
        "new_password1": NEW_PASSWORD,
        "new_password2": NEW_PASSWORD,
        "usable_password": "true",
    }
    url = path.format(user=user.pk)

    with password_hashing_slot():
        response = staff_client.post(url, fields)

    assert_busy(response)
    assert not any(u.check_password(NEW_PASSWORD) for u in User.objects.all())
    assert staff_client.post(url, fields).status_code == 302, form
    assert any(u.check_password(NEW_PASSWORD) for u in User.objects.all())


@pytest.mark.django_db
def test_the_cap_is_the_setting(api_client, settings, tmp_path):
    settings.PASSWORD_HASH_CONCURRENCY = 2
    settings.PASSWORD_HASH_WAIT_SECONDS = 0
    settings.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "hashing-slots"  # as in cap_of_one
    user = UserFactory()

    with password_hashing_slot():
        assert login(api_client, user.email).status_code == 200  # the second slot
        with password_hashing_slot():
            assert_busy(login(api_client, user.email))


@pytest.mark.django_db
def test_the_schema_documents_the_503_of_every_operation_that_hashes(client):
    paths = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()[
        "paths"
    ]

    for path, method in [
        ("/api/auth/register", "post"),
        ("/api/auth/login", "post"),
        ("/api/numbers", "post"),
        ("/api/numbers/{number_id}/pin", "put"),
    ]:
        documented = paths[path][method]["responses"]["503"]
        assert "`service_unavailable`" in documented["description"], (path, method)


def test_a_slot_is_free_again_after_a_failure_inside_it(settings):
    settings.PASSWORD_HASH_CONCURRENCY = 1

    with pytest.raises(ValueError), password_hashing_slot():
        raise ValueError("a bug while the slot is held")

    with password_hashing_slot():
        pass  # the slot was given back


HOLD_A_SLOT = """
import sys
from core.passwords import password_hashing_slot
with password_hashing_slot():
    print("holding", flush=True)
    sys.stdin.read()
"""


@pytest.mark.django_db
def test_a_slot_held_by_another_process_refuses_a_login_here(api_client, user, tmp_path, settings):
    # gunicorn's sync workers are processes: the cap must count their hashes together.
    settings.PASSWORD_HASH_CONCURRENCY = 1
    settings.PASSWORD_HASH_WAIT_SECONDS = 0
    settings.PASSWORD_HASHING_SLOTS_DIR = tmp_path / "hashing-slots"
    env = relay_env(tmp_path, PASSWORD_HASH_CONCURRENCY=1)
    holder = subprocess.Popen(  # noqa: S603 - our own command
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", HOLD_A_SLOT],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        assert_busy(login(api_client, user.email))
    finally:
        holder.communicate(timeout=30)  # closes its stdin: it leaves the slot and exits

    assert holder.returncode == 0
    assert login(api_client, user.email).status_code == 200
