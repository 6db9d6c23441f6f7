"""Issue 53, finding 7: the API key does not outlive the owner's usual remedy. A password
reset replaces it (the mails say so, and the console's next sign-in shows the new key once);
a password change replaces it when asked (`rotateApiKey`); and the console shows the key
masked, revealed only with the password. GET /api/dashboard keeps answering it, as the
interface requires."""

import json
import re

import pytest
from django.test import Client

from accounts import services
from tests.conftest import api_key_client, jwt_client
from tests.console.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-brand-new-passphrase"
TOKEN = re.compile(r"/password-reset/(\S+)")


def reset_by_mail(api_client, user, mailbox) -> None:
    api_client.post("/api/auth/password-reset", {"email": user.email}, format="json")
    reset_mail = mailbox.only(user.email)
    assert "also replaces your API key" in " ".join(reset_mail.text.split())
    token = TOKEN.search(reset_mail.text).group(1)
    response = api_client.post(
        "/api/auth/password-reset/confirm",
        {"token": token, "newPassword": NEW_PASSWORD},
        format="json",
    )
    assert response.status_code == 204, response.content


def test_a_reset_ends_the_stolen_keys_access(api_client, user, mailbox):
    stolen = user.api_key
    assert api_key_client(stolen).get("/api/user/me").status_code == 200

    reset_by_mail(api_client, user, mailbox)

    assert api_key_client(stolen).get("/api/user/me").status_code == 401
    user.refresh_from_db()
    assert user.api_key != stolen
    assert api_key_client(user.api_key).get("/api/user/me").status_code == 200
    changed = [m for m in mailbox.delivered() if "was changed" in m.message["Subject"]]
    assert "Your API key was replaced too" in changed[0].text


def test_the_next_login_answers_the_new_key_and_the_dashboard_keeps_it(api_client, user, mailbox):
    reset_by_mail(api_client, user, mailbox)
    user.refresh_from_db()

    login = api_client.post(
        "/api/auth/login", {"email": user.email, "password": NEW_PASSWORD}, format="json"
    )
    dashboard = jwt_client(login.json()["token"]).get("/api/dashboard")

    assert login.json()["user"]["apiKey"] == user.api_key
    assert dashboard.json()["apiKey"] == user.api_key


def test_the_consoles_next_sign_in_shows_the_new_key_once(api_client, user, mailbox):
    reset_by_mail(api_client, user, mailbox)
    user.refresh_from_db()
    browser = Client()

    signed_in = browser.post(
        "/login", {"email": user.email, "password": NEW_PASSWORD, "next": "/history"}
    )
    shown = browser.get(signed_in.url)
    again = browser.get("/account/api-key/new?next=/history")
    later = Client()
    later.post("/login", {"email": user.email, "password": NEW_PASSWORD})

    assert signed_in.status_code == 302
    assert signed_in.url.startswith("/account/api-key/new?")
    assert shown.status_code == 200
    assert f'value="{user.api_key}"' in shown.text
    assert "Your password was reset" in shown.text and 'href="/history"' in shown.text
    assert again.status_code == 302 and again.url == "/history"  # shown that once only
    assert user.api_key not in later.get("/numbers").text


def test_a_password_change_keeps_the_key_unless_asked(user):
    session = services.session_open(user=user)
    client = jwt_client(session.token)
    first = user.api_key

    kept = client.post(
        "/api/user/password",
        {"currentPassword": DEFAULT_PASSWORD, "newPassword": NEW_PASSWORD},
        format="json",
    )
    assert kept.status_code == 204
    assert api_key_client(first).get("/api/user/me").status_code == 200

    rotated = client.post(
        "/api/user/password",
        {"currentPassword": NEW_PASSWORD, "newPassword": DEFAULT_PASSWORD, "rotateApiKey": True},
        format="json",
    )

    assert rotated.status_code == 204
    assert api_key_client(first).get("/api/user/me").status_code == 401
    fresh = client.get("/api/dashboard").json()["apiKey"]
    assert fresh != first
    assert api_key_client(fresh).get("/api/user/me").status_code == 200


@pytest.mark.parametrize("value", ["true", 1, None, [], "\ud800"], ids=repr)
def test_rotate_api_key_must_be_a_boolean(client_jwt, user, value):

    response = client_jwt.post(
        "/api/user/password",
        json.dumps(
            {
                "currentPassword": DEFAULT_PASSWORD,
                "newPassword": NEW_PASSWORD,
                "rotateApiKey": value,
            }
        ),
        content_type="application/json",
    )

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["rotateApiKey"]
    user.refresh_from_db()
    assert user.check_password(DEFAULT_PASSWORD)


def test_the_console_reveals_the_key_only_with_the_password(user, settings):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "3/m"
    browser = Client()
    sign_in(browser, user)

    account = browser.get("/account").text
    form = browser.get("/account/api-key/reveal")
    wrong = browser.post("/account/api-key/reveal", {"password": "left-open-guess"})
    right = browser.post("/account/api-key/reveal", {"password": DEFAULT_PASSWORD})
    limited = browser.post("/account/api-key/reveal", {"password": DEFAULT_PASSWORD})

    assert user.api_key not in account and user.api_key[-4:] in account
    assert 'autocomplete="current-password"' in form.text and user.api_key not in form.text
    assert wrong.status_code == 403 and user.api_key not in wrong.text
    assert right.status_code == 200 and f'value="{user.api_key}"' in right.text
    assert limited.status_code == 429 and user.api_key not in limited.text
