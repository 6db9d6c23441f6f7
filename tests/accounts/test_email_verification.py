"""E-mail verification (issue 39) through the API, against the real SMTP server: the link
sign-up mails, followed once, twice, too late and after a change of address; resending it;
moving the account to another address; REQUIRE_EMAIL_VERIFICATION on numbers and calls
(REST and the socket); and no token in any log line."""

import io
import logging

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from hypothesis import given
from rest_framework.test import APIClient

from accounts.models import User
from accounts.verification import verification_token_make
from calls.models import Call
from tests.conftest import jwt_client
from tests.factories import DEFAULT_PASSWORD, UserFactory
from tests.hostile import FUZZ, assert_error_shape, documents, fill
from tests.ledger import aack
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-and-unusual-passphrase"
VERIFY_PREFIX = "http://testserver/verify-email/"


def register(api_client, email="new@example.com"):
    response = api_client.post(
        "/api/auth/register", {"email": email, "password": PASSWORD}, format="json"
    )
    assert response.status_code == 201, response.content
    return jwt_client(response.json()["token"])


def link_to(mailbox, address: str) -> str:
    """The verification link of the one mail `address` got."""
    message = mailbox.only(address)
    links = [link for link in message.links() if link.startswith(VERIFY_PREFIX)]
    assert len(links) == 1, message.text
    assert f'href="{links[0]}"' in message.html
    return links[0]


def token_of(link: str) -> str:
    return link.removeprefix(VERIFY_PREFIX)


def verify(api_client, token: str):
    return api_client.post("/api/auth/verify-email", {"token": token}, format="json")


def me(client) -> dict:
    response = client.get("/api/user/me")
    assert response.status_code == 200
    return response.json()


# --- sign-up and the link ---------------------------------------------------------------------
def test_sign_up_mails_a_link_that_verifies_the_address(api_client, mailbox):
    client = register(api_client)
    assert (me(client)["emailVerified"], me(client)["pendingEmail"]) == (False, None)
    assert client.get("/api/dashboard").json()["emailVerified"] is False

    message = mailbox.only("new@example.com")
    assert message.message["Subject"] == "Confirm your e-mail address for Relay"
    assert "within 48 hours" in message.text
    link = link_to(mailbox, "new@example.com")

    response = verify(api_client, token_of(link))

    assert response.status_code == 204 and response.content == b""
    assert me(client)["emailVerified"] is True
    assert client.get("/api/dashboard").json()["emailVerified"] is True


def test_a_link_works_once(api_client, mailbox):
    register(api_client)
    token = token_of(link_to(mailbox, "new@example.com"))
    assert verify(api_client, token).status_code == 204

    again = verify(api_client, token)

    assert again.status_code == 400
    assert again.json()["code"] == "verification_invalid"


def test_a_link_expires_after_email_verification_hours(api_client, mailbox, clock, settings):
    settings.EMAIL_VERIFICATION_HOURS = 48
    client = register(api_client)
    token = token_of(link_to(mailbox, "new@example.com"))

    clock.advance(hours=48, seconds=5)
    late = verify(api_client, token)

    assert late.status_code == 400 and late.json()["code"] == "verification_invalid"
    assert me(client)["emailVerified"] is False


def test_a_link_within_its_hours_still_works(api_client, mailbox, clock):
    register(api_client)
    token = token_of(link_to(mailbox, "new@example.com"))

    clock.advance(hours=47)

    assert verify(api_client, token).status_code == 204


@pytest.mark.parametrize(
    "token",
    ["", "x", "not-a-uuid.1-abc", "0" * 32 + ".cd2x4k-" + "0" * 20, "a" * 100],
)
def test_a_malformed_or_made_up_token_is_refused(api_client, user, token):
    response = verify(api_client, token)

    assert response.status_code == 400
    assert response.json()["code"] in {"verification_invalid", "invalid_request"}
    user.refresh_from_db()
    assert user.email_verified is False


def test_one_users_token_does_not_verify_another(api_client, user, other_user):
    mine = verification_token_make(user=user)
    borrowed = f"{other_user.pk.hex}.{mine.partition('.')[2]}"

    response = verify(api_client, borrowed)

    assert response.json()["code"] == "verification_invalid"
    other_user.refresh_from_db()
    assert other_user.email_verified is False


def test_verifying_is_rate_limited_per_ip(api_client, user, settings):
    settings.RATE_LIMIT_AUTH_PER_IP = "2/m"
    for _ in range(2):
        assert verify(api_client, "x").status_code == 400

    limited = verify(api_client, verification_token_make(user=user))

    assert limited.status_code == 429 and limited.json()["code"] == "rate_limited"
    assert int(limited["Retry-After"]) >= 1
    user.refresh_from_db()
    assert user.email_verified is False


def test_staff_made_accounts_are_verified_and_get_no_mail(mailbox, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{PASSWORD}\n"))
    call_command("createuser", "--email", "staffmade@example.com", "--password-stdin")
    superuser = User.objects.create_superuser("root@example.com", PASSWORD)

    assert User.objects.get(email="staffmade@example.com").email_verified is True
    assert superuser.email_verified is True
    assert mailbox.delivered() == []


# --- resending ------------------------------------------------------------------------------
def test_resend_mails_a_new_link_and_both_work_until_one_is_used(api_client, mailbox):
    client = register(api_client)
    first = token_of(link_to(mailbox, "new@example.com"))

    response = client.post("/api/user/verify-email/resend")

    assert response.status_code == 204
    messages = [m for m in mailbox.delivered() if "new@example.com" in m.rcpt_tos]
    assert len(messages) == 2
    assert verify(api_client, first).status_code == 204
    second = token_of([m for m in messages[1].links() if m.startswith(VERIFY_PREFIX)][0])
    assert verify(api_client, second).json()["code"] == "verification_invalid"  # used up


def test_resend_when_verified_is_a_409(client_jwt, user, mailbox):
    User.objects.filter(pk=user.pk).update(email_verified=True)

    response = client_jwt.post("/api/user/verify-email/resend")

    assert response.status_code == 409
    assert response.json()["code"] == "email_already_verified"
    assert mailbox.delivered() == []


def test_resend_is_rate_limited_per_user(client_jwt, user, settings, mailbox):
    settings.RATE_LIMIT_VERIFICATION_MAIL_PER_USER = "2/h"
    for _ in range(2):
        assert client_jwt.post("/api/user/verify-email/resend").status_code == 204

    limited = client_jwt.post("/api/user/verify-email/resend")

    assert limited.status_code == 429 and limited.json()["code"] == "rate_limited"
    assert int(limited["Retry-After"]) >= 1
    assert len(mailbox.delivered()) == 2


def test_resend_needs_credentials(api_client):
    response = api_client.post("/api/user/verify-email/resend")

    assert response.status_code == 401


# --- changing the address ---------------------------------------------------------------------
def change(client, email: str, password: str = DEFAULT_PASSWORD):
    return client.put("/api/user/email", {"email": email, "password": password}, format="json")


def login(api_client, email: str, password: str = DEFAULT_PASSWORD):
    return api_client.post("/api/auth/login", {"email": email, "password": password}, format="json")


def test_a_change_of_address_waits_for_the_new_address_then_logs_in_with_it(
    api_client, client_jwt, user, mailbox
):
    old = user.email
    User.objects.filter(pk=user.pk).update(email_verified=True)

    response = change(client_jwt, "  Moved@Example.com ")

    assert response.status_code == 202
    assert response.json() == {"email": old, "pendingEmail": "moved@example.com"}
    assert (me(client_jwt)["email"], me(client_jwt)["pendingEmail"]) == (old, "moved@example.com")
    notice = mailbox.only(old)
    assert "moved@example.com" in notice.text and "http://testserver/password-reset" in (
        notice.text
    )
    assert not [link for link in notice.links() if link.startswith(VERIFY_PREFIX)]
    token = token_of(link_to(mailbox, "moved@example.com"))
    assert login(api_client, "moved@example.com").status_code == 401  # not yet

    assert verify(api_client, token).status_code == 204

    profile = me(client_jwt)
    assert (profile["email"], profile["emailVerified"], profile["pendingEmail"]) == (
        "moved@example.com",
        True,
        None,
    )
    assert login(api_client, "moved@example.com").status_code == 200
    assert login(api_client, old).status_code == 401


def test_a_change_outdates_the_links_mailed_before_it(api_client, client_jwt, user, mailbox):
    earlier = verification_token_make(user=user)  # the sign-up link of the old address
    assert change(client_jwt, "first@example.com").status_code == 202
    first = token_of(link_to(mailbox, "first@example.com"))
    assert change(client_jwt, "second@example.com").status_code == 202

    assert verify(api_client, earlier).json()["code"] == "verification_invalid"
    assert verify(api_client, first).json()["code"] == "verification_invalid"
    second = token_of(link_to(mailbox, "second@example.com"))
    assert verify(api_client, second).status_code == 204
    user.refresh_from_db()
    assert (user.email, user.email_pending, user.email_verified) == (
        "second@example.com",
        "",
        True,
    )


def test_a_wrong_password_is_refused_and_counts_toward_the_login_limit(
    api_client, client_jwt, user, settings, mailbox
):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "2/m"
    wrong = change(client_jwt, "moved@example.com", password="not-the-password")
    assert wrong.status_code == 403
    assert wrong.json() == {"error": "The current password is wrong.", "code": "password_mismatch"}
    assert change(client_jwt, "moved@example.com", password="still-wrong").status_code == 403

    assert change(client_jwt, "moved@example.com").status_code == 429
    assert login(api_client, user.email).status_code == 429  # the same count as logging in
    user.refresh_from_db()
    assert user.email_pending == ""
    assert mailbox.delivered() == []


def test_an_address_another_account_has_is_taken(client_jwt, user, other_user, mailbox):
    response = change(client_jwt, other_user.email.upper())

    assert response.status_code == 409
    assert response.json()["code"] == "email_taken"
    user.refresh_from_db()
    assert user.email_pending == ""
    assert mailbox.delivered() == []


def test_ones_own_address_is_not_a_change(client_jwt, user):
    response = change(client_jwt, user.email)

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["email"]


def test_an_address_taken_between_the_change_and_its_link_is_refused_then(
    api_client, client_jwt, user, mailbox
):
    assert change(client_jwt, "contested@example.com").status_code == 202
    token = token_of(link_to(mailbox, "contested@example.com"))
    UserFactory(email="contested@example.com")

    response = verify(api_client, token)

    assert response.status_code == 409 and response.json()["code"] == "email_taken"
    user.refresh_from_db()
    assert user.email != "contested@example.com"


def test_changes_share_the_per_user_mail_limit(client_jwt, settings, mailbox):
    settings.RATE_LIMIT_VERIFICATION_MAIL_PER_USER = "1/h"
    assert change(client_jwt, "one@example.com").status_code == 202

    assert change(client_jwt, "two@example.com").status_code == 429
    assert client_jwt.post("/api/user/verify-email/resend").status_code == 429


def test_a_pending_change_is_what_resend_mails(client_jwt, user, mailbox):
    User.objects.filter(pk=user.pk).update(email_verified=True)
    change(client_jwt, "pending@example.com")
    mailbox.delivered()

    assert client_jwt.post("/api/user/verify-email/resend").status_code == 204

    to_pending = [m for m in mailbox.delivered() if "pending@example.com" in m.rcpt_tos]
    assert len(to_pending) == 2


# --- REQUIRE_EMAIL_VERIFICATION -------------------------------------------------------------
@pytest.fixture
def required(settings):
    settings.REQUIRE_EMAIL_VERIFICATION = True


def take_number(client, token: str):
    return client.post(
        "/api/numbers", {"alias": "Office", "pin": "1234", "captchaToken": token}, format="json"
    )


def test_required_an_unverified_user_takes_no_number_until_verified(
    required, api_client, client_jwt, user, inventory, captcha_token
):
    token = captcha_token()

    refused = take_number(client_jwt, token)

    assert refused.status_code == 403
    assert refused.json()["code"] == "email_unverified"
    assert not Number.objects.filter(owner=user).exists()
    assert verify(api_client, verification_token_make(user=user)).status_code == 204
    assert take_number(client_jwt, token).status_code == 201  # the token was left unspent


def test_required_an_unverified_user_places_no_call_until_verified(
    required, api_client, client_jwt, user
):
    call = {"callId": "c1", "to": "+442079460120", "message": "Hello"}

    refused = client_jwt.post("/api/calls", call, format="json")

    assert refused.status_code == 403 and refused.json()["code"] == "email_unverified"
    assert not Call.objects.exists()
    verify(api_client, verification_token_make(user=user))
    assert client_jwt.post("/api/calls", call, format="json").status_code == 202


def test_not_required_an_unverified_user_calls_as_before(client_jwt, user):
    response = client_jwt.post(
        "/api/calls", {"callId": "c1", "to": "+442079460120", "message": "Hi"}, format="json"
    )

    assert response.status_code == 202
    user.refresh_from_db()
    assert user.email_verified is False


@pytest.mark.django_db(transaction=True)
async def test_required_the_socket_answers_an_error_frame_then_calls_once_verified(
    settings, user, communicator
):
    settings.REQUIRE_EMAIL_VERIFICATION = True
    ws, connected = await communicator(user)
    assert connected

    await ws.send_json_to({"type": "call", "callId": "c1", "to": "+442079460120", "message": "x"})
    frame = await ws.receive_json_from(timeout=5)

    assert frame["type"] == "error"
    assert (frame["code"], frame["callId"]) == ("email_unverified", "c1")
    assert "Confirm your e-mail address" in frame["error"]
    assert not await sync_to_async(Call.objects.exists)()
    # Verified meanwhile: the same socket's next call goes through.
    token = await sync_to_async(verification_token_make)(user=user)
    response = await sync_to_async(APIClient().post)(
        "/api/auth/verify-email", {"token": token}, format="json"
    )
    assert response.status_code == 204
    await ws.send_json_to({"type": "call", "callId": "c1", "to": "+442079460120", "message": "x"})
    assert await ws.receive_json_from(timeout=5) == await aack("c1", "queued")


# --- no token in a log line -------------------------------------------------------------------
def test_no_verification_token_reaches_a_log_line(api_client, client, mailbox, caplog):
    caplog.set_level(logging.DEBUG)
    register(api_client)
    link = link_to(mailbox, "new@example.com")
    token = token_of(link)
    secret = token.partition(".")[2]

    assert client.get(link.removeprefix("http://testserver")).status_code == 200
    assert client.get(f"/verify-email/{token}x").status_code == 200
    assert client.post(f"/verify-email/{token}x").status_code == 400  # Django logs 4xx
    assert verify(api_client, token).status_code == 204

    text = caplog.text
    assert "GET /verify-email/[token] 200" in text
    assert "POST /verify-email/[token] 400" in text
    assert secret not in text and token not in text


# --- hostile input ----------------------------------------------------------------------------
HOSTILE_ENDPOINTS = {
    "verify": ("post", "/api/auth/verify-email", {"token": '"__UNIQUE__.1-abc"'}),
    "change": (
        "put",
        "/api/user/email",
        {"email": '"__UNIQUE__@example.com"', "password": f'"{DEFAULT_PASSWORD}"'},
    ),
}


@pytest.fixture
def open_limits(settings):
    for name in ("AUTH_PER_IP", "AUTH_PER_EMAIL", "VERIFICATION_MAIL_PER_USER"):
        setattr(settings, f"RATE_LIMIT_{name}", "1000000/m")


@pytest.mark.parametrize("endpoint", list(HOSTILE_ENDPOINTS))
def test_no_hostile_body_gets_a_server_error(endpoint, client_jwt, open_limits):
    method, path, valid = HOSTILE_ENDPOINTS[endpoint]

    @FUZZ
    @given(text=documents(valid))
    def run(text):
        data = fill(text).encode("utf-8", "surrogatepass")
        response = getattr(client_jwt, method)(path, data, content_type="application/json")
        assert response.status_code < 500, response.content[:500]
        if response.status_code >= 400:
            assert_error_shape(response.json())

    run()


@pytest.mark.parametrize(
    ("path", "method", "field", "value"),
    [
        ("/api/auth/verify-email", "post", "token", "abc\\u0000def"),
        ("/api/auth/verify-email", "post", "token", "abc\\ud800def"),
        ("/api/auth/verify-email", "post", "token", "x" * 10_000),
        ("/api/user/email", "put", "email", "a\\u0000@example.com"),
        ("/api/user/email", "put", "email", "a\\udfff@example.com"),
        ("/api/user/email", "put", "email", "a" * 10_000 + "@example.com"),
        ("/api/user/email", "put", "password", "pass\\u0000word"),
    ],
)
def test_nul_lone_surrogates_and_huge_strings_are_a_400_naming_the_field(
    client_jwt, path, method, field, value
):
    body = {"token": "x", "email": "ok@example.com", "password": DEFAULT_PASSWORD}
    members = ", ".join(
        f'"{name}": "{value if name == field else good}"' for name, good in body.items()
    )

    response = getattr(client_jwt, method)(
        path, "{" + members + "}", content_type="application/json"
    )

    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]


@pytest.mark.parametrize("body", [{"token": 5}, {"token": None}, {}, ["x"]])
def test_a_token_of_the_wrong_type_is_a_400(api_client, body):
    response = api_client.post("/api/auth/verify-email", body, format="json")

    assert response.status_code == 400 and response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("email", [5, None, True, ["a@example.com"]])
def test_an_address_of_the_wrong_type_is_a_400(client_jwt, email):
    response = client_jwt.put(
        "/api/user/email", {"email": email, "password": DEFAULT_PASSWORD}, format="json"
    )

    assert response.status_code == 400 and "email" in response.json()["fields"]
