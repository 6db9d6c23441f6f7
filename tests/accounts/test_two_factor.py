"""The second factor through the API: enrolment, confirmation, login with a TOTP code or a
recovery code, replays, the rate limit on wrong codes, turning it off, and whose it is.
Codes are computed with pyotp from the secret the API answered, at the time the server sees
(the `clock` fixture moves it without sleeping)."""

import json
import logging
from urllib.parse import parse_qs, urlsplit

import pyotp
import pytest
from django.utils import timezone

from accounts.models import LoginSession, RecoveryCode, TotpDevice
from tests.factories import DEFAULT_PASSWORD
from tests.factories import totp_now as code_now

pytestmark = pytest.mark.django_db


def login(api_client, user, **extra):
    body = {"email": user.email, "password": DEFAULT_PASSWORD, **extra}
    return api_client.post("/api/auth/login", body, format="json")


def start_with(client, password: str = DEFAULT_PASSWORD):
    return client.post("/api/user/2fa", {"password": password}, format="json")


def start(client) -> str:
    response = start_with(client)
    assert response.status_code == 200, response.content
    return response.json()["secret"]


@pytest.fixture
def enrolled(client_jwt):
    """`user`'s factor turned on through the API: its secret and recovery codes."""
    secret = start(client_jwt)
    response = client_jwt.post("/api/user/2fa/confirm", {"code": code_now(secret)}, format="json")
    assert response.status_code == 200, response.content
    return secret, response.json()["recoveryCodes"]


@pytest.fixture
def next_step(clock):
    """Move the server's clock into the next 30-second step (codes of earlier ones are
    spent), a second past its start: the codes a test makes next and the server's check of
    them fall in the same step, however close to a step's end the real clock was."""

    def advance() -> None:
        into_step = timezone.now().timestamp() % 30
        clock.advance(seconds=30 - into_step + 1)

    return advance


# --- enrolment --------------------------------------------------------------------------------
def test_starting_answers_a_secret_its_uri_and_a_qr_code(client_jwt, user):
    response = start_with(client_jwt)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"secret", "otpauthUri", "qrSvg"}
    uri = urlsplit(body["otpauthUri"])
    assert (uri.scheme, uri.netloc) == ("otpauth", "totp")
    assert parse_qs(uri.query)["secret"] == [body["secret"]]
    assert parse_qs(uri.query)["issuer"] == ["Relay"]
    assert user.email.replace("@", "%40") in uri.path
    assert body["qrSvg"].startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert "<script" not in body["qrSvg"]
    assert len(pyotp.TOTP(body["secret"]).byte_secret()) == 20  # 160 bits, RFC 4226's advice
    device = TotpDevice.objects.get(user=user)
    assert device.confirmed_at is None
    assert body["secret"] not in device.secret_ciphertext  # stored encrypted


def test_the_issuer_is_a_setting(client_jwt, settings):
    settings.TOTP_ISSUER = "Acme Relay"

    uri = start_with(client_jwt).json()["otpauthUri"]

    assert parse_qs(urlsplit(uri).query)["issuer"] == ["Acme Relay"]


def test_a_pending_factor_is_not_asked_for_at_login(client_jwt, api_client, user):
    start(client_jwt)

    assert login(api_client, user).status_code == 200
    assert client_jwt.get("/api/user/me").json()["twoFactor"] is False


def test_starting_again_replaces_the_pending_secret(client_jwt, user):
    first = start(client_jwt)
    second = start(client_jwt)

    assert first != second
    assert TotpDevice.objects.filter(user=user).count() == 1
    stale = client_jwt.post("/api/user/2fa/confirm", {"code": code_now(first)}, format="json")
    assert stale.status_code == 401 and stale.json()["code"] == "otp_invalid"
    fresh = client_jwt.post("/api/user/2fa/confirm", {"code": code_now(second)}, format="json")
    assert fresh.status_code == 200


def test_confirming_turns_the_factor_on_and_gives_ten_recovery_codes(client_jwt, user):
    secret = start(client_jwt)

    response = client_jwt.post("/api/user/2fa/confirm", {"code": code_now(secret)}, format="json")

    assert response.status_code == 200
    codes = response.json()["recoveryCodes"]
    assert len(codes) == len(set(codes)) == 10
    assert client_jwt.get("/api/user/me").json()["twoFactor"] is True
    stored = list(RecoveryCode.objects.filter(device__user=user).values_list("digest", flat=True))
    assert len(stored) == 10
    assert not any(code.replace("-", "") in digest for code in codes for digest in stored)


def test_a_wrong_code_does_not_turn_the_factor_on(client_jwt, user):
    secret = start(client_jwt)
    wrong = f"{(int(code_now(secret)) + 1) % 1_000_000:06d}"

    response = client_jwt.post("/api/user/2fa/confirm", {"code": wrong}, format="json")

    assert response.status_code == 401
    assert response.json()["code"] == "otp_invalid"
    assert TotpDevice.objects.get(user=user).confirmed_at is None
    assert client_jwt.get("/api/user/me").json()["twoFactor"] is False


def test_confirming_without_starting_is_a_conflict(client_jwt):
    response = client_jwt.post("/api/user/2fa/confirm", {"code": "123456"}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "two_factor_off"


def test_starting_or_confirming_while_the_factor_is_on_is_refused(client_jwt, enrolled, user):
    secret, _ = enrolled

    again = start_with(client_jwt)
    confirm = client_jwt.post("/api/user/2fa/confirm", {"code": code_now(secret)}, format="json")

    assert again.status_code == confirm.status_code == 409
    assert again.json()["code"] == confirm.json()["code"] == "two_factor_on"
    assert TotpDevice.objects.get(user=user).confirmed_at is not None


# --- login ------------------------------------------------------------------------------------
def test_login_without_the_code_asks_for_it(api_client, user, enrolled):
    sessions = LoginSession.objects.filter(user=user).count()

    response = login(api_client, user)

    assert response.status_code == 401
    assert response.json()["code"] == "otp_required"
    assert LoginSession.objects.filter(user=user).count() == sessions


def test_otp_required_is_only_said_after_the_right_password(api_client, user, enrolled):
    response = api_client.post(
        "/api/auth/login", {"email": user.email, "password": "not-the-password"}, format="json"
    )

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_credentials"


def test_login_with_the_code_opens_a_session(api_client, user, enrolled, next_step):
    secret, _ = enrolled
    next_step()  # the confirming code's step is spent
    sessions = LoginSession.objects.filter(user=user).count()

    response = login(api_client, user, otp=code_now(secret))

    assert response.status_code == 200, response.content
    assert LoginSession.objects.filter(user=user).count() == sessions + 1


def test_a_wrong_code_is_refused(api_client, user, enrolled, next_step):
    secret, _ = enrolled
    next_step()
    wrong = f"{(int(code_now(secret)) + 1) % 1_000_000:06d}"

    response = login(api_client, user, otp=wrong)

    assert response.status_code == 401
    assert response.json()["code"] == "otp_invalid"


def test_a_code_cannot_be_used_twice_within_its_window(api_client, user, enrolled, next_step):
    secret, _ = enrolled
    next_step()
    code = code_now(secret)

    first = login(api_client, user, otp=code)
    replayed = login(api_client, user, otp=code)

    assert first.status_code == 200
    assert replayed.status_code == 401 and replayed.json()["code"] == "otp_invalid"
    next_step()
    assert login(api_client, user, otp=code_now(secret)).status_code == 200


def test_the_confirming_code_cannot_log_in(api_client, user, client_jwt):
    secret = start(client_jwt)
    code = code_now(secret)
    assert (
        client_jwt.post("/api/user/2fa/confirm", {"code": code}, format="json").status_code == 200
    )

    response = login(api_client, user, otp=code)

    assert response.status_code == 401 and response.json()["code"] == "otp_invalid"


def test_an_earlier_code_is_refused_after_a_later_one(api_client, user, enrolled, next_step):
    secret, _ = enrolled
    next_step()
    earlier, later = code_now(secret, steps=-1), code_now(secret)
    assert earlier != later or pytest.skip("the two steps happen to share a code")

    assert login(api_client, user, otp=later).status_code == 200
    assert login(api_client, user, otp=earlier).json()["code"] == "otp_invalid"


def test_codes_of_the_neighbouring_steps_are_accepted_but_no_further(
    api_client, user, enrolled, next_step
):
    secret, _ = enrolled
    next_step()
    next_step()

    too_far = login(api_client, user, otp=code_now(secret, steps=2))
    ahead = login(api_client, user, otp=code_now(secret, steps=1))

    assert too_far.status_code == 401
    assert ahead.status_code == 200


def test_each_recovery_code_logs_in_once(api_client, user, enrolled):
    _, codes = enrolled

    first = login(api_client, user, otp=codes[0])
    again = login(api_client, user, otp=codes[0])
    typed_loosely = login(api_client, user, otp=codes[1].upper().replace("-", " "))

    assert first.status_code == 200
    assert again.status_code == 401 and again.json()["code"] == "otp_invalid"
    assert typed_loosely.status_code == 200


def test_recovery_codes_run_out(api_client, user, enrolled, settings):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "1000/m"
    settings.RATE_LIMIT_AUTH_PER_IP = "1000/m"
    _, codes = enrolled

    for code in codes:
        assert login(api_client, user, otp=code).status_code == 200
    used_up = [login(api_client, user, otp=code) for code in codes[:3]]

    assert [r.json()["code"] for r in used_up] == ["otp_invalid"] * 3
    assert not RecoveryCode.objects.filter(device__user=user, used_at__isnull=True).exists()


def test_wrong_codes_are_rate_limited_per_user(api_client, user, enrolled, settings, next_step):
    settings.RATE_LIMIT_OTP_PER_USER = "3/h"
    secret, codes = enrolled
    next_step()

    wrong = [login(api_client, user, otp="000000" if i % 2 else "nope") for i in range(3)]
    right_but_late = login(api_client, user, otp=code_now(secret))
    recovery_too = login(api_client, user, otp=codes[0])

    assert [r.status_code for r in wrong] == [401, 401, 401]
    assert right_but_late.status_code == recovery_too.status_code == 429
    assert right_but_late.json()["code"] == "rate_limited"
    assert int(right_but_late["Retry-After"]) >= 1
    assert RecoveryCode.objects.filter(device__user=user, used_at__isnull=True).count() == 10


def test_the_limit_is_per_user(api_client, user, other_user, enrolled, settings, next_step):
    settings.RATE_LIMIT_OTP_PER_USER = "2/h"
    for _ in range(3):
        login(api_client, user, otp="000000")

    assert login(api_client, other_user).status_code == 200


def test_no_code_or_secret_is_logged(api_client, user, client_jwt, caplog, next_step):
    caplog.set_level(logging.DEBUG)
    secret = start(client_jwt)
    confirming = code_now(secret)
    codes = client_jwt.post("/api/user/2fa/confirm", {"code": confirming}, format="json").json()[
        "recoveryCodes"
    ]
    next_step()
    login(api_client, user, otp="999999")
    login(api_client, user, otp=codes[0])
    login(api_client, user, otp=code_now(secret))

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "second factor turned on" in logged
    for value in [secret, confirming, "999999", *codes, codes[0].replace("-", "")]:
        assert value not in logged


# --- turning it off ---------------------------------------------------------------------------
def disable(client, **body):
    return client.delete("/api/user/2fa", body, format="json")


def test_turning_off_needs_the_password_and_a_code(api_client, client_jwt, user, enrolled):
    secret, _ = enrolled

    response = disable(client_jwt, password=DEFAULT_PASSWORD, code=code_now(secret, steps=1))

    assert response.status_code == 200 and response.json() == {"success": True}
    assert not TotpDevice.objects.filter(user=user).exists()
    assert not RecoveryCode.objects.filter(device__user=user).exists()
    assert client_jwt.get("/api/user/me").json()["twoFactor"] is False
    assert login(api_client, user).status_code == 200


def test_a_recovery_code_turns_it_off_too(client_jwt, user, enrolled):
    _, codes = enrolled

    response = disable(client_jwt, password=DEFAULT_PASSWORD, code=codes[4])

    assert response.status_code == 200
    assert not TotpDevice.objects.filter(user=user).exists()


def test_a_wrong_password_or_code_leaves_it_on(client_jwt, user, enrolled):
    secret, _ = enrolled

    wrong_password = disable(client_jwt, password="not-the-password", code=code_now(secret))
    wrong_code = disable(client_jwt, password=DEFAULT_PASSWORD, code="000000")

    assert (wrong_password.status_code, wrong_code.status_code) == (403, 401)
    assert wrong_password.json()["code"] == "password_mismatch"
    assert wrong_code.json()["code"] == "otp_invalid"
    assert TotpDevice.objects.get(user=user).confirmed_at is not None


def test_wrong_passwords_count_toward_the_limit(client_jwt, user, enrolled, settings):
    settings.RATE_LIMIT_OTP_PER_USER = "2/h"
    secret, _ = enrolled

    for _ in range(2):
        disable(client_jwt, password="not-the-password", code="000000")
    limited = disable(client_jwt, password=DEFAULT_PASSWORD, code=code_now(secret, steps=1))

    assert limited.status_code == 429
    assert TotpDevice.objects.filter(user=user).exists()


def test_turning_off_without_a_factor_is_a_conflict(client_jwt):
    response = disable(client_jwt, password=DEFAULT_PASSWORD, code="123456")

    assert response.status_code == 409
    assert response.json()["code"] == "two_factor_off"


# --- whose it is ------------------------------------------------------------------------------
def test_another_user_cannot_touch_yours(outsider, client_jwt, user, enrolled):
    secret, codes = enrolled

    start_theirs = start_with(outsider)
    their_confirm = outsider.post(
        "/api/user/2fa/confirm", {"code": code_now(secret, steps=1)}, format="json"
    )
    their_disable = disable(outsider, password=DEFAULT_PASSWORD, code=codes[0])

    assert start_theirs.status_code == 200  # their own enrolment, not yours
    assert their_confirm.json()["code"] == "otp_invalid"  # your code is not of their secret
    assert their_disable.json()["code"] == "two_factor_off"  # they have none on
    assert TotpDevice.objects.get(user=user).confirmed_at is not None
    assert RecoveryCode.objects.filter(device__user=user, used_at__isnull=True).count() == 10
    assert outsider.get("/api/user/me").json()["twoFactor"] is False
    assert client_jwt.get("/api/user/me").json()["twoFactor"] is True


def test_the_endpoints_need_credentials(api_client):
    assert start_with(api_client).status_code == 401
    assert api_client.post("/api/user/2fa/confirm", {"code": "1"}, format="json").status_code == 401
    assert disable(api_client, password="x", code="1").status_code == 401


def test_an_api_key_may_enrol_too(client_key, user):
    assert start_with(client_key).status_code == 200


# --- hostile input ----------------------------------------------------------------------------
WRONG_TYPES = [123456, None, True, ["123456"], {"a": 1}]
HOSTILE_CODES = ["", "\x00", "1\ud800", "\udfff", "1" * 65, "x" * 10_000, *WRONG_TYPES]
HOSTILE_PASSWORDS = ["", "a\x00b", "\ud800", "x" * 257, *WRONG_TYPES]


def send(client, method: str, path: str, body: dict):
    """`body` as JSON text the way a client writes it: json.dumps escapes a lone surrogate
    (the test client's own encoder cannot)."""
    return getattr(client, method)(path, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("value", HOSTILE_CODES, ids=repr)
def test_hostile_codes_are_invalid_requests(client_jwt, api_client, user, enrolled, value):
    credentials = {"email": user.email, "password": DEFAULT_PASSWORD}
    answers = [
        send(client_jwt, "post", "/api/user/2fa/confirm", {"code": value}),
        send(client_jwt, "delete", "/api/user/2fa", {"password": DEFAULT_PASSWORD, "code": value}),
        send(api_client, "post", "/api/auth/login", {**credentials, "otp": value}),
    ]

    for response in answers:
        assert response.status_code == 400, (response.status_code, response.content[:200])
        assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("value", HOSTILE_PASSWORDS, ids=repr)
def test_hostile_passwords_are_invalid_requests(client_jwt, user, enrolled, value):
    response = send(client_jwt, "delete", "/api/user/2fa", {"password": value, "code": "123456"})

    assert response.status_code == 400, (response.status_code, response.content[:200])
    assert response.json()["code"] == "invalid_request"
    assert TotpDevice.objects.get(user=user).confirmed_at is not None


# --- mail -------------------------------------------------------------------------------------
def test_a_mail_tells_the_user_the_factor_is_on_then_off(mailbox, client_jwt, user):
    secret = start(client_jwt)
    assert mailbox.delivered() == []  # a pending enrolment is nothing to tell

    codes = client_jwt.post(
        "/api/user/2fa/confirm", {"code": code_now(secret)}, format="json"
    ).json()["recoveryCodes"]
    on = mailbox.only(user.email)

    assert on.message["Subject"] == "Two-step login is on for your Relay account"
    assert "turned on" in on.text and "turned on" in on.html
    assert "<html" in on.html and "<html" not in on.text
    for value in [secret, *codes]:
        assert value not in on.text and value not in on.html

    assert disable(client_jwt, password=DEFAULT_PASSWORD, code=codes[0]).status_code == 200
    off = mailbox.delivered()[1:]
    assert [m.message["Subject"] for m in off] == ["Two-step login is off for your Relay account"]
    assert "turned off" in off[0].text and "by the staff" not in off[0].text
    assert codes[0] not in off[0].text


def test_a_refused_attempt_sends_no_mail(mailbox, client_jwt, enrolled):
    mailbox.delivered()
    before = len(mailbox.messages)

    disable(client_jwt, password=DEFAULT_PASSWORD, code="000000")

    assert len(mailbox.delivered()) == before
