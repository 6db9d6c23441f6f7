"""Register, log in and log out in the console: the API's accounts, rules and limits, and a
sign-in that is a LoginSession like any other."""

import re

import pytest
from django.test import Client

from accounts.models import LoginSession, User
from console.signin import SESSION_KEY
from tests.conftest import jwt_client
from tests.console.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db


def test_registering_opens_an_account_and_signs_the_browser_in(client):
    response = client.post(
        "/register", {"email": "New@Example.com", "password": "a-long-passphrase"}
    )

    assert response.status_code == 302 and response.url == "/numbers"
    user = User.objects.get(email="new@example.com")
    assert LoginSession.objects.get(pk=client.session[SESSION_KEY]).user == user
    assert "Your numbers" in client.get("/numbers").content.decode()


def test_a_weak_password_is_refused_next_to_the_password(client):
    response = client.post("/register", {"email": "new@example.com", "password": "password"})

    assert response.status_code == 400
    assert 'id="id_password_errors"' in response.content.decode()
    assert "This password is too common." in response.content.decode()
    assert not User.objects.filter(email="new@example.com").exists()


def test_a_taken_email_is_refused_next_to_the_email(client, user):
    response = client.post("/register", {"email": user.email, "password": "a-long-passphrase"})

    assert response.status_code == 409
    assert 'id="id_email_errors"' in response.content.decode()
    assert "already registered" in response.content.decode()


def test_a_malformed_email_is_refused_next_to_the_email(client):
    response = client.post("/register", {"email": "not-an-address", "password": "a-long-pass"})

    assert response.status_code == 400
    assert 'id="id_email_errors"' in response.content.decode()


def test_sign_up_closed_says_so_above_the_form(client, settings):
    settings.REGISTRATION_OPEN = False

    response = client.post("/register", {"email": "n@example.com", "password": "a-long-pass"})

    assert response.status_code == 403
    assert "Sign-up is closed" in response.content.decode()


def test_logging_in_opens_a_login_session_and_follows_next(client, user):
    response = client.post(
        "/login", {"email": user.email, "password": DEFAULT_PASSWORD, "next": "/numbers/new"}
    )

    assert response.status_code == 302 and response.url == "/numbers/new"
    assert LoginSession.objects.get(pk=client.session[SESSION_KEY]).user == user


def test_next_never_leaves_the_site(client, user):
    response = client.post(
        "/login", {"email": user.email, "password": DEFAULT_PASSWORD, "next": "https://evil.test/"}
    )

    assert response.url == "/numbers"


@pytest.mark.parametrize("path", ["/login", "/register"])
def test_a_signed_in_browser_skips_the_sign_in_pages(browser_client, path):
    response = browser_client.get(path)

    assert response.status_code == 302 and response.url == "/numbers"


def test_a_wrong_password_is_refused_above_the_form(client, user):
    response = client.post("/login", {"email": user.email, "password": "wrong-password-1"})

    assert response.status_code == 401
    assert "Wrong e-mail or password." in response.content.decode()
    assert SESSION_KEY not in client.session


def test_logging_out_ends_the_login_session(browser_client):
    response = browser_client.post("/logout")

    assert response.status_code == 302 and response.url == "/login"
    browser_client.login_session.refresh_from_db()
    assert browser_client.login_session.active is False
    assert browser_client.get("/numbers").status_code == 302


def test_logging_out_takes_only_a_post(browser_client):
    assert browser_client.get("/logout").status_code == 405
    browser_client.login_session.refresh_from_db()
    assert browser_client.login_session.active is True


def test_a_signed_out_request_is_sent_to_log_in(client):
    response = client.get("/numbers/new")

    assert response.status_code == 302
    assert response.url == "/login?next=/numbers/new"


def test_the_console_session_is_listed_in_the_dashboard(browser_client, login):
    sessions = jwt_client(login.token).get("/api/dashboard").json()["sessions"]

    assert str(browser_client.login_session.pk) in {session["id"] for session in sessions}


def test_ending_the_session_through_the_api_signs_the_browser_out(browser_client, login):
    session_id = browser_client.login_session.pk

    ended = jwt_client(login.token).delete(f"/api/user/sessions/{session_id}")

    assert ended.status_code == 200
    response = browser_client.get("/numbers")
    assert response.status_code == 302 and response.url.startswith("/login")
    assert SESSION_KEY not in browser_client.session


def test_a_login_is_rate_limited_like_the_apis(client, user, settings):
    settings.RATE_LIMIT_AUTH_PER_IP = "2/m"
    for _ in range(2):
        client.post("/login", {"email": user.email, "password": "wrong-password-1"})

    response = client.post("/login", {"email": user.email, "password": DEFAULT_PASSWORD})

    assert response.status_code == 429
    assert 1 <= int(response.headers["Retry-After"]) <= 61
    assert "Too many requests" in response.content.decode()


def test_console_and_api_logins_share_one_budget(client, api_client, user, settings):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "1/m"
    api_client.post("/api/auth/login", {"email": user.email, "password": "x"}, format="json")

    response = client.post("/login", {"email": user.email, "password": DEFAULT_PASSWORD})

    assert response.status_code == 429


def test_a_registration_is_rate_limited_like_the_apis(client, settings):
    settings.RATE_LIMIT_AUTH_PER_IP = "1/m"
    client.post("/register", {"email": "a@example.com", "password": "password"})

    response = client.post("/register", {"email": "b@example.com", "password": "a-long-pass"})

    assert response.status_code == 429
    assert not User.objects.filter(email="b@example.com").exists()


@pytest.mark.parametrize("path", ["/login", "/register", "/logout"])
def test_the_sign_in_forms_enforce_csrf(path, user):
    client = Client(enforce_csrf_checks=True)

    response = client.post(path, {"email": user.email, "password": DEFAULT_PASSWORD})

    assert response.status_code == 403
    assert SESSION_KEY not in client.session


def test_a_login_with_the_forms_csrf_token_succeeds(user):
    client = Client(enforce_csrf_checks=True)
    client.get("/login")
    token = client.cookies["csrftoken"].value

    response = client.post(
        "/login", {"email": user.email, "password": DEFAULT_PASSWORD, "csrfmiddlewaretoken": token}
    )

    assert response.status_code == 302


def test_signing_in_again_ends_the_old_session_under_a_new_key(client, user):
    first = sign_in(client, user)
    before = client.session.session_key

    second = sign_in(client, user)

    assert client.session.session_key != before
    first.refresh_from_db()
    assert first.active is False and second.active is True


@pytest.mark.parametrize(
    ("path", "section", "current"),
    [
        ("/numbers", "Numbers", "page"),
        ("/numbers/new", "Numbers", "true"),
        ("/calls", "Calls", "page"),
        ("/history", "History", "page"),
        ("/account", "Account", "page"),
        ("/account/webhook", "Account", "true"),
    ],
)
def test_the_nav_marks_the_section_of_the_page_shown(browser_client, path, section, current):
    page = browser_client.get(path).content.decode()

    marked = re.findall(r'<a href="[^"]*" aria-current="(\w+)">(\w+)</a>', page)
    assert marked == [(current, section)]
