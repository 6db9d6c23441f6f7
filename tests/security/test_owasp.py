"""OWASP API Security Top 10 cases that are not covered beside their features."""

import json
import subprocess
import sys

import pytest
from django.conf import settings

from accounts import services as accounts
from accounts.models import LoginSession, User
from calls.models import Call
from harness.live import child_environ
from tests.conftest import jwt_client
from tests.factories import NumberFactory
from virtual_numbers.models import BlockedCaller, Number

pytestmark = pytest.mark.django_db


@pytest.fixture
def victim(other_user):
    """Another user's number, blocklist entry, call and session: every id an attacker could try."""
    number = NumberFactory(owner=other_user, alias="victim")
    BlockedCaller.objects.create(number=number, caller_num="+447700900666")
    call = Call.objects.create(
        owner=other_user,
        call_id="secret-call",
        to="+442079460120",
        message="m",
        caller_id=number.number,
    )
    session = accounts.session_open(user=other_user).session
    return {"number": number, "call": call, "session": session}


def test_every_id_route_answers_404_for_another_users_id_and_changes_nothing(client_jwt, victim):
    n, c, s = victim["number"], victim["call"], victim["session"]
    attempts = [
        ("put", f"/api/numbers/{n.pk}/alias", {"alias": "pwned"}),
        ("put", f"/api/numbers/{n.pk}/pin", {"currentPin": "1234", "newPin": "0000"}),
        ("delete", f"/api/numbers/{n.pk}", None),
        ("get", f"/api/numbers/{n.pk}/blocked", None),
        ("post", f"/api/numbers/{n.pk}/blocked", {"caller_num": "+447700900777"}),
        ("delete", f"/api/numbers/{n.pk}/blocked", {"caller_num": "+447700900666"}),
        ("get", f"/api/numbers/{n.pk}/members", None),
        ("get", f"/api/numbers/shared/{n.pk}", None),
        ("put", f"/api/numbers/shared/{n.pk}", {"webhook": True}),
        ("post", f"/api/numbers/{n.pk}/members", {"email": "x@example.com", "role": "member"}),
        ("get", f"/api/calls/{c.call_id}", None),
        ("post", f"/api/calls/{c.call_id}/cancel", None),
        ("delete", f"/api/user/sessions/{s.pk}", None),
        ("get", "/api/history", {"number_id": str(n.pk)}),
    ]
    for method, path, body in attempts:
        response = getattr(client_jwt, method)(
            path, body, format=None if method == "get" else "json"
        )
        assert response.status_code == 404, (method, path)
        assert response.json() == {"error": "Not found.", "code": "not_found"}

    n.refresh_from_db()
    assert (n.alias, n.owner_id) == ("victim", victim["session"].user_id)
    assert list(BlockedCaller.objects.values_list("caller_num", flat=True)) == ["+447700900666"]
    assert Call.objects.get(pk=c.pk).status == "queued"
    assert LoginSession.objects.get(pk=s.pk).active


def test_mass_assignment_of_identity_and_privilege_fields_is_ignored(api_client, other_user):
    body = {
        "email": "mass@example.com",
        "password": "a-long-and-unusual-passphrase",
        "id": str(other_user.pk),
        "plan": "enterprise",
        "apiKey": "vr_" + "a" * 40,
        "is_staff": True,
        "is_superuser": True,
        "isStaff": True,
    }
    created = api_client.post("/api/auth/register", body, format="json").json()

    user = User.objects.get(email="mass@example.com")
    assert str(user.pk) == created["user"]["id"] != str(other_user.pk)
    assert (user.plan, user.is_staff, user.is_superuser) == ("free", False, False)
    assert created["user"]["apiKey"] != body["apiKey"]


def test_mass_assignment_on_numbers_and_calls_is_ignored(
    user, client_jwt, other_user, inventory, captcha_token
):
    response = client_jwt.post(
        "/api/numbers",
        {
            "alias": "a",
            "pin": "1234",
            "captchaToken": captcha_token(),
            "owner": str(other_user.pk),
            "number": "+442079460999",
            "id": "00000000-0000-0000-0000-000000000001",
        },
        format="json",
    )
    number = Number.objects.get(pk=response.json()["id"])
    assert number.owner == user
    assert str(number.pk) != "00000000-0000-0000-0000-000000000001"

    renamed = client_jwt.put(
        f"/api/numbers/{number.pk}/alias",
        {"alias": "b", "owner": str(other_user.pk), "number": "+1"},
        format="json",
    )
    number.refresh_from_db()
    assert renamed.status_code == 200 and number.owner == user and number.number != "+1"

    client_jwt.post(
        "/api/calls",
        {
            "callId": "m1",
            "to": "+442079460120",
            "message": "hi",
            "status": "completed",
            "owner": str(other_user.pk),
        },
        format="json",
    )
    call = Call.objects.get(call_id="m1")
    assert (call.owner, call.status) == (user, "queued")


def test_matrix_update_cannot_touch_other_fields(user, client_jwt):
    client_jwt.put(
        "/api/user/matrix",
        {"matrixId": "@a:example.org", "plan": "gold", "email": "x@evil.example"},
        format="json",
    )
    user.refresh_from_db()
    assert (user.plan, user.email) != ("gold", "x@evil.example")


@pytest.mark.parametrize(
    "path", ["/api/auth/register", "/api/auth/login", "/api/calls", "/api/captcha/verify"]
)
def test_a_one_mebibyte_body_is_refused_with_413(client_jwt, path):
    huge = json.dumps({"email": "a@example.com", "password": "x" * (1024 * 1024)})

    response = client_jwt.post(path, huge, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


def test_a_body_under_the_limit_is_read_normally(client_jwt):
    response = client_jwt.post(
        "/api/calls", {"callId": "ok", "to": "+442079460120", "message": "x" * 1000}, format="json"
    )
    assert response.status_code == 202


def test_history_limit_is_clamped_not_trusted(client_jwt):
    assert client_jwt.get("/api/history", {"limit": 10**12}).json()["limit"] == 200


def production_environment_from_the_docs() -> dict:
    """The variables docs/operations.md tells a production deployment to set."""
    text = (settings.BASE_DIR / "docs" / "operations.md").read_text()
    block = text.split("For production set at least:", 1)[1].split("```sh", 1)[1].split("```")[0]
    env = {}
    for line in block.splitlines():
        for word in line.split("#")[0].split():
            name, _, value = word.partition("=")
            env[name] = value
    return env


def test_deploy_checks_pass_with_the_documented_production_settings(tmp_path):
    documented = production_environment_from_the_docs()
    assert {"SECRET_KEY", "SECURE_HSTS_SECONDS", "SECURE_HSTS_PRELOAD"} <= set(documented)
    env = {
        **child_environ(),
        **{k: v for k, v in documented.items() if "…" not in v and "<" not in v},
        "DEBUG": "false",
        "SECRET_KEY": "p" + "roduction-secret-" * 4 + "0123456789abcdef",
        "ALLOWED_HOSTS": "relay.example.com",
        "RELAY_VAR_DIR": str(tmp_path),
    }
    env.pop("DATABASE_URL", None)  # placeholders: check --deploy opens no connection
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_booleans_must_be_true_or_false(tmp_path):
    env = {**child_environ(), "DEBUG": "ture", "RELAY_VAR_DIR": str(tmp_path)}
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "DEBUG must be true or false" in result.stderr


def test_logs_of_a_whole_session_contain_no_secret(api_client, caplog, inventory, captcha_token):
    import logging

    caplog.set_level(logging.DEBUG)
    password, pin, new_pin = "another-long-passphrase-9", "97531", "86420"
    body = api_client.post(
        "/api/auth/register", {"email": "logs@example.com", "password": password}, format="json"
    ).json()
    client = jwt_client(body["token"])
    key = client.post("/api/user/regenerate-api-key").json()["apiKey"]
    number = client.post(
        "/api/numbers", {"alias": "a", "pin": pin, "captchaToken": captcha_token()}, format="json"
    ).json()
    client.put(
        f"/api/numbers/{number['id']}/pin",
        {"currentPin": "00000", "newPin": new_pin},
        format="json",
    )
    client.put(
        f"/api/numbers/{number['id']}/pin", {"currentPin": pin, "newPin": new_pin}, format="json"
    )
    client.post(
        "/api/calls", {"callId": "l1", "to": "+442079460120", "message": "hi"}, format="json"
    )
    api_client.post(
        "/api/auth/login", {"email": "logs@example.com", "password": password}, format="json"
    )
    client.post("/api/auth/logout")

    text = caplog.text
    assert "POST /api/numbers 201" in text
    for secret in (
        password,
        body["token"],
        body["user"]["apiKey"],
        key,
        f'"{pin}"',
        f'"{new_pin}"',
    ):
        assert secret not in text
