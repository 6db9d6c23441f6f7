"""The console's password pages: change it on the account page, and "Forgot your
password?" from the login page to the mailed link and a new password; the same services,
rules and limits as the API, with a real SMTP server."""

import pytest
from django.test import Client

from accounts import services
from accounts.models import LoginSession
from console.signin import SESSION_KEY
from tests.conftest import jwt_client
from tests.console.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-brand-new-passphrase"
LINK_PREFIX = "http://testserver/password-reset/"


def test_the_account_page_links_to_the_change_form(browser_client):
    page = browser_client.get("/account").content.decode()
    assert 'href="/account/password"' in page


def test_changing_the_password_keeps_this_browser_and_ends_the_rest(browser_client, user, mailbox):
    elsewhere = services.session_open(user=user)

    response = browser_client.post(
        "/account/password",
        {"currentPassword": DEFAULT_PASSWORD, "newPassword": NEW_PASSWORD},
    )

    assert response.status_code == 302 and response.url == "/account"
    page = browser_client.get("/account").content.decode()
    assert "Your password is changed. Every other sign-in has ended." in page
    assert jwt_client(elsewhere.token).get("/api/user/me").status_code == 401
    assert list(LoginSession.objects.filter(user=user, active=True)) == [
        browser_client.login_session
    ]
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    assert "was changed" in mailbox.only(user.email).message["Subject"]


def test_a_wrong_current_password_is_shown_next_to_it(browser_client, user, mailbox):
    response = browser_client.post(
        "/account/password", {"currentPassword": "nope-nope", "newPassword": NEW_PASSWORD}
    )

    assert response.status_code == 403
    page = response.content.decode()
    assert 'id="id_currentPassword_errors"' in page
    assert "The current password is wrong." in page
    assert mailbox.delivered() == []


def test_a_weak_new_password_is_shown_next_to_it(browser_client):
    response = browser_client.post(
        "/account/password", {"currentPassword": DEFAULT_PASSWORD, "newPassword": "password"}
    )
    assert response.status_code == 400
    assert 'id="id_newPassword_errors"' in response.content.decode()


def test_the_change_form_needs_a_sign_in(client):
    response = client.get("/account/password")
    assert response.status_code == 302 and response.url.startswith("/login")


def test_forgot_password_from_the_login_page_to_a_new_password(client, user, mailbox):
    assert 'href="/password-reset"' in client.get("/login").content.decode()
    asked = client.post("/password-reset", {"email": user.email})
    assert asked.status_code == 302 and asked.url == "/password-reset/sent"
    assert "Check your mail" in client.get(asked.url).content.decode()

    (link,) = mailbox.only(user.email).links()
    assert link.startswith(LINK_PREFIX)
    path = link.removeprefix("http://testserver")
    form = client.get(path)
    assert form.status_code == 200
    assert "Choose a new password" in form.content.decode()

    done = client.post(path, {"newPassword": NEW_PASSWORD})

    assert done.status_code == 302 and done.url == "/login"
    assert "Log in with it." in client.get("/login").content.decode()
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    again = client.get(path)  # the link worked once
    assert again.status_code == 400
    assert "This link does not work" in again.content.decode()
    fresh = Client()
    assert fresh.post("/login", {"email": user.email, "password": NEW_PASSWORD}).status_code == 302


def test_an_unknown_address_sees_the_same_page_and_gets_no_mail(client, mailbox):
    asked = client.post("/password-reset", {"email": "nobody@example.com"})
    assert asked.status_code == 302 and asked.url == "/password-reset/sent"
    assert mailbox.delivered() == []


def test_a_weak_password_on_the_link_page_keeps_the_link_usable(client, user, mailbox):
    client.post("/password-reset", {"email": user.email})
    (link,) = mailbox.only(user.email).links()
    path = link.removeprefix("http://testserver")

    refused = client.post(path, {"newPassword": "12345678901"})

    assert refused.status_code == 400
    assert 'id="id_newPassword_errors"' in refused.content.decode()
    assert client.post(path, {"newPassword": NEW_PASSWORD}).status_code == 302


def test_a_browser_signed_in_is_signed_out_by_the_reset(browser_client, user, mailbox):
    browser_client.post("/password-reset", {"email": user.email})
    (link,) = mailbox.only(user.email).links()

    browser_client.post(link.removeprefix("http://testserver"), {"newPassword": NEW_PASSWORD})

    assert SESSION_KEY not in browser_client.session
    assert browser_client.get("/account").status_code == 302
    sign_in_again = Client()
    user.refresh_from_db()
    assert not user.check_password(DEFAULT_PASSWORD)
    assert (
        sign_in_again.post("/login", {"email": user.email, "password": NEW_PASSWORD}).status_code
        == 302
    )


def test_asking_too_often_is_refused_on_the_form(client, user, settings):
    settings.RATE_LIMIT_PASSWORD_RESET_PER_EMAIL = "1/h"
    client.post("/password-reset", {"email": user.email})
    refused = client.post("/password-reset", {"email": user.email})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0


def test_a_nul_in_the_address_is_a_400(client, mailbox):
    refused = client.post("/password-reset", {"email": "a\x00@example.com"})
    assert refused.status_code == 400
    assert mailbox.delivered() == []


def test_sign_in_helper_still_works_after_a_change(client, user, mailbox):
    sign_in(client, user)
    client.post(
        "/account/password", {"currentPassword": DEFAULT_PASSWORD, "newPassword": NEW_PASSWORD}
    )
    assert client.get("/account").status_code == 200  # this browser stays signed in
