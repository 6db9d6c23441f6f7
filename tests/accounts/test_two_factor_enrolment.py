"""Issue 53, finding 3: a bearer token alone cannot turn a second factor on. Enrolling takes
the current password (counted toward the login rate limits), and confirming ends every other
session and socket of the account (4401), so a thief's stolen token neither binds the
thief's authenticator nor outlives the owner's enrolment. A reset by mail keeps the factor
and its mail says how to reach staff if the factor is lost."""

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from accounts import apikeys, services
from accounts.models import LoginSession, TotpDevice
from tests.conftest import api_key_client, jwt_client
from tests.console.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD, totp_now, two_factor_on

CLOSED_4401 = {"type": "websocket.close", "code": 4401}


def start(client, password=DEFAULT_PASSWORD):
    return client.post("/api/user/2fa", {"password": password}, format="json")


def confirm(client, secret: str):
    return client.post("/api/user/2fa/confirm", {"code": totp_now(secret)}, format="json")


@pytest.mark.django_db
def test_a_stolen_token_cannot_start_enrolment_without_the_password(client_jwt, user):
    bare = client_jwt.post("/api/user/2fa")
    guessed = start(client_jwt, "the-thief-guesses-this")

    assert bare.status_code == 400
    assert bare.json()["code"] == "invalid_request"
    assert list(bare.json()["fields"]) == ["password"]
    assert guessed.status_code == 403
    assert guessed.json()["code"] == "password_mismatch"
    assert not TotpDevice.objects.filter(user=user).exists()


@pytest.mark.django_db
def test_wrong_passwords_at_enrolment_count_toward_the_login_limit(
    client_jwt, api_client, user, settings
):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "3/m"
    for _ in range(3):
        assert start(client_jwt, "the-thief-guesses-this").status_code == 403

    right = start(client_jwt)
    login = api_client.post(
        "/api/auth/login", {"email": user.email, "password": DEFAULT_PASSWORD}, format="json"
    )

    assert right.status_code == 429
    assert int(right.headers["Retry-After"]) >= 1
    assert login.status_code == 429  # the same bucket as logins to the account
    assert not TotpDevice.objects.filter(user=user).exists()


@pytest.mark.django_db
def test_confirming_ends_every_other_session(user):
    owner = services.session_open(user=user)
    thief = services.session_open(user=user)
    owners_client, thiefs_client = jwt_client(owner.token), jwt_client(thief.token)
    secret = start(owners_client).json()["secret"]

    confirmed = confirm(owners_client, secret)

    assert confirmed.status_code == 200
    assert thiefs_client.get("/api/user/me").status_code == 401
    assert owners_client.get("/api/user/me").status_code == 200
    assert list(LoginSession.objects.filter(user=user, active=True)) == [owner.session]


@pytest.mark.django_db
def test_confirming_with_an_api_key_ends_every_session(user):
    session = services.session_open(user=user)
    keyed = api_key_client(services.user_api_key_regenerate(user=user))
    secret = start(keyed).json()["secret"]

    assert confirm(keyed, secret).status_code == 200
    assert jwt_client(session.token).get("/api/user/me").status_code == 401
    assert not LoginSession.objects.filter(user=user, active=True).exists()


@pytest.mark.django_db(transaction=True)
async def test_the_other_sessions_sockets_close_with_4401(communicator, user):
    mine = await sync_to_async(services.session_open)(user=user)
    socket, connected = await communicator(user)  # another session of the same user
    assert connected
    client = jwt_client(mine.token)
    secret = (await sync_to_async(start)(client)).json()["secret"]

    response = await sync_to_async(confirm)(client, secret)

    assert response.status_code == 200
    assert await socket.receive_output(timeout=5) == CLOSED_4401


@pytest.mark.django_db
def test_the_console_asks_for_the_password_and_ends_the_other_sign_ins(user):
    browser, elsewhere = Client(), Client()
    sign_in(browser, user)
    sign_in(elsewhere, user)

    page = browser.get("/account/2fa/start")
    wrong = browser.post("/account/2fa/start", {"password": "the-thief-guesses-this"})
    right = browser.post("/account/2fa/start", {"password": DEFAULT_PASSWORD})
    device = TotpDevice.objects.get(user=user)
    confirmed = browser.post(
        "/account/2fa", {"code": totp_now(apikeys.decrypt(device.secret_ciphertext))}
    )

    assert page.status_code == 200 and 'autocomplete="current-password"' in page.text
    assert wrong.status_code == 403 and "password" in wrong.text.lower()
    assert right.status_code == 302 and right.url == "/account/2fa"
    assert confirmed.status_code == 200 and "recovery" in confirmed.text.lower()
    assert browser.get("/account").status_code == 200
    assert elsewhere.get("/account").status_code == 302  # signed out


@pytest.mark.django_db
def test_a_reset_by_mail_keeps_the_factor_and_says_how_to_reach_staff(
    api_client, user, mailbox, settings
):
    settings.SUPPORT_EMAIL = "help@relay.example"
    two_factor_on(user)

    api_client.post("/api/auth/password-reset", {"email": user.email}, format="json")

    (mail,) = [m for m in mailbox.delivered() if "Reset" in m.message["Subject"]]
    assert TotpDevice.objects.filter(user=user, confirmed_at__isnull=False).exists()
    assert "a new password does not turn it off" in mail.text
    assert f"staff at {settings.SUPPORT_EMAIL}" in " ".join(mail.text.split())


@pytest.mark.django_db
def test_a_reset_mail_says_nothing_of_a_factor_an_account_lacks(api_client, user, mailbox):
    api_client.post("/api/auth/password-reset", {"email": user.email}, format="json")

    assert "two-step login" not in mailbox.only(user.email).text
