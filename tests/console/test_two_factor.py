"""Two-step login in the console, through Django's test client: turning it on from the
account page (the secret and its QR code inline, the recovery codes shown once), logging in
in two steps with the pending login kept in the server's session (never the password), and
turning it off with the password and a code."""

import re

import pytest
from django.test import Client

from accounts.models import LoginSession, TotpDevice
from console.signin import PENDING_KEY, PENDING_SECONDS, SESSION_KEY
from tests.accounts.test_two_factor import code_now
from tests.factories import DEFAULT_PASSWORD, two_factor_on

pytestmark = pytest.mark.django_db

SECRET_SHOWN = re.compile(r'id="totp-secret"[^>]*value="([A-Z2-7]+)"')


@pytest.fixture
def enrolled(user, browser_client):
    """`user` with two-step login on (through the service), from `browser_client`'s sign-in
    (which stays): the secret, the recovery codes."""
    return two_factor_on(user, keep=browser_client.login_session)


def password_step(client: Client, user, **extra):
    return client.post("/login", {"email": user.email, "password": DEFAULT_PASSWORD, **extra})


def test_turning_it_on_from_the_account_page(browser_client, user):
    account = browser_client.get("/account").content.decode()
    assert "Turn on two-step login" in account

    asked = browser_client.get("/account/2fa/start")
    assert 'autocomplete="current-password"' in asked.content.decode()
    started = browser_client.post("/account/2fa/start", {"password": DEFAULT_PASSWORD})
    assert started.status_code == 302 and started.url == "/account/2fa"
    page = browser_client.get("/account/2fa")
    html = page.content.decode()
    secret = SECRET_SHOWN.search(html).group(1)
    assert page["Cache-Control"] == "no-store"
    assert '<div class="qr" role="img"' in html and "<svg" in html
    page_itself = html[html.index("<main") : html.index("</main>")]
    assert "<script" not in page_itself  # the QR code is markup, not a script's drawing

    confirmed = browser_client.post("/account/2fa", {"code": code_now(secret)})

    assert confirmed.status_code == 200
    codes = re.findall(r"<code>([a-z0-9-]{19})</code>", confirmed.content.decode())
    assert len(codes) == 10
    assert confirmed["Cache-Control"] == "no-store"
    assert TotpDevice.objects.get(user=user).confirmed_at is not None
    account = browser_client.get("/account").content.decode()
    assert "Recovery codes left: 10" in account
    assert not any(code in account for code in codes)  # shown that once only


def test_a_wrong_confirming_code_is_shown_on_its_field(browser_client, user):
    browser_client.post("/account/2fa/start", {"password": DEFAULT_PASSWORD})

    response = browser_client.post("/account/2fa", {"code": "000000"})

    assert response.status_code == 401
    html = response.content.decode()
    assert 'id="id_code_errors"' in html and "wrong or already used" in html
    assert SECRET_SHOWN.search(html)  # the same secret again, to try once more
    assert TotpDevice.objects.get(user=user).confirmed_at is None


def test_hostile_codes_are_bad_requests(browser_client):
    browser_client.post("/account/2fa/start", {"password": DEFAULT_PASSWORD})

    for value in ["a\x00b", "9" * 65]:
        assert browser_client.post("/account/2fa", {"code": value}).status_code == 400


def test_login_asks_for_the_code_on_a_second_page(client, user, enrolled, clock):
    secret, _ = enrolled
    clock.advance(seconds=30)

    first = password_step(client, user, next="/history")

    assert first.status_code == 302 and first.url == "/login/code"
    assert SESSION_KEY not in client.session  # not signed in yet
    pending = client.session[PENDING_KEY]
    assert pending["user"] == str(user.pk) and pending["next"] == "/history"
    assert DEFAULT_PASSWORD not in str(dict(client.session.items()))
    page = client.get("/login/code").content.decode()
    assert 'name="password"' not in page and DEFAULT_PASSWORD not in page
    assert 'autocomplete="one-time-code"' in page

    second = client.post("/login/code", {"otp": code_now(secret)})

    assert second.status_code == 302 and second.url == "/history"
    assert LoginSession.objects.get(pk=client.session[SESSION_KEY]).user == user
    assert PENDING_KEY not in client.session


def test_a_wrong_password_never_reaches_the_code_page(client, user, enrolled):
    response = client.post("/login", {"email": user.email, "password": "not-the-password"})

    assert response.status_code == 401
    assert PENDING_KEY not in client.session
    assert client.get("/login/code").url == "/login"


def test_a_wrong_code_stays_on_the_code_page(client, user, enrolled):
    password_step(client, user)

    response = client.post("/login/code", {"otp": "000000"})

    assert response.status_code == 401
    assert 'id="id_otp_errors"' in response.content.decode()
    assert SESSION_KEY not in client.session


def test_a_recovery_code_finishes_the_login_once(client, user, enrolled):
    _, codes = enrolled
    password_step(client, user)
    assert client.post("/login/code", {"otp": codes[0]}).status_code == 302

    other = Client()
    password_step(other, user)
    assert other.post("/login/code", {"otp": codes[0]}).status_code == 401


def test_the_pending_login_expires(client, user, enrolled, clock):
    secret, _ = enrolled
    password_step(client, user)
    clock.advance(seconds=PENDING_SECONDS + 1)

    response = client.post("/login/code", {"otp": code_now(secret)})

    assert response.status_code == 302 and response.url == "/login"
    assert SESSION_KEY not in client.session and PENDING_KEY not in client.session


def test_a_user_deactivated_while_the_code_is_awaited_is_sent_back_to_log_in(
    client, user, enrolled
):
    secret, _ = enrolled
    password_step(client, user)
    user.is_active = False
    user.save(update_fields=["is_active"])

    response = client.post("/login/code", {"otp": code_now(secret)})

    assert response.status_code == 302 and response.url == "/login"
    assert SESSION_KEY not in client.session and PENDING_KEY not in client.session


def test_the_code_page_is_rate_limited_per_user(client, user, enrolled, settings, clock):
    settings.RATE_LIMIT_OTP_PER_USER = "2/h"
    secret, _ = enrolled
    clock.advance(seconds=30)
    password_step(client, user)
    for _ in range(2):
        client.post("/login/code", {"otp": "000000"})

    response = client.post("/login/code", {"otp": code_now(secret)})

    assert response.status_code == 429
    assert SESSION_KEY not in client.session


def test_turning_it_off_needs_the_password_and_a_code(browser_client, user, enrolled):
    secret, codes = enrolled

    wrong = browser_client.post(
        "/account/2fa/disable", {"password": "not-the-password", "code": codes[0]}
    )
    assert wrong.status_code == 403
    assert 'id="id_password_errors"' in wrong.content.decode()

    response = browser_client.post(
        "/account/2fa/disable", {"password": DEFAULT_PASSWORD, "code": codes[1]}
    )

    assert response.status_code == 302 and response.url == "/account"
    assert not TotpDevice.objects.filter(user=user).exists()
    assert "Two-step login is off" in browser_client.get("/account").content.decode()


def test_the_pages_are_for_signed_in_people_only(client):
    for path in ["/account/2fa", "/account/2fa/start", "/account/2fa/disable"]:
        assert client.get(path).url.startswith("/login?next=")
    assert client.post("/account/2fa/start").url.startswith("/login?next=")
