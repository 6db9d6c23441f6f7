"""The admin's sign-in (issue 53, finding 1): the API's service, limits and second factor.

The finding: a staff user with TOTP on reached /admin/ with the password alone, and forty
wrong passwords in a row from one address all got the stock error page, the right one right
after signing in. Here, through Django's test client on the admin's own form: the password
alone asks for the code, the code is checked and spent as the API's `otp` is, the API's rate
limits answer 429 with Retry-After (the right password too), and with REQUIRE_STAFF_2FA on,
staff without a factor get the page that says how to turn one on, and no admin. The same in
Chromium: tests/admin/test_browser_sign_in.py.
"""

import logging

import pytest

from accounts import services
from accounts.models import LoginSession, User
from relay import admin_signin
from tests.accounts.test_two_factor import code_now, next_step  # noqa: F401 - a fixture
from tests.factories import DEFAULT_PASSWORD, UserFactory, two_factor_on

pytestmark = pytest.mark.django_db

STAFF_EMAIL = "staff@example.com"
STAFF_PASSWORD = "staff-password-long-enough"
LOGIN = "/admin/login/"
CODE = "/admin/login/code/"


@pytest.fixture
def staff():
    return User.objects.create_superuser(STAFF_EMAIL, STAFF_PASSWORD)


@pytest.fixture
def enrolled_staff(staff, next_step):  # noqa: F811 - the fixture imported above
    """`staff` with a confirmed second factor, and its secret; the clock is moved into the
    next step, so the code that confirmed it is not the one the test logs in with."""
    secret, _ = two_factor_on(staff, password=STAFF_PASSWORD)
    next_step()
    return staff, secret


def post_login(client, email=STAFF_EMAIL, password=STAFF_PASSWORD, ip="10.0.0.1", **extra):
    return client.post(LOGIN, {"username": email, "password": password, **extra}, REMOTE_ADDR=ip)


def in_admin(client) -> bool:
    """Whether `client` sees the admin's user list (rather than being sent to log in)."""
    response = client.get("/admin/accounts/user/")
    if response.status_code == 302:
        assert response["Location"].startswith(LOGIN)
        return False
    assert response.status_code == 200
    assert STAFF_EMAIL in response.content.decode()
    return True


def active_sessions(user) -> int:
    return LoginSession.objects.filter(user=user, active=True).count()


# --- the second factor ------------------------------------------------------------------------
def test_the_password_alone_of_staff_with_a_factor_asks_for_the_code(client, enrolled_staff):
    staff, _ = enrolled_staff

    response = post_login(client)

    assert response.status_code == 302
    assert response["Location"] == CODE
    assert not in_admin(client)
    assert active_sessions(staff) == 0
    page = client.get(CODE)
    assert page.status_code == 200
    assert 'name="otp"' in page.content.decode()
    assert 'type="password"' not in page.content.decode()  # the password is never asked again


def test_a_wrong_code_is_refused(client, enrolled_staff):
    staff, _ = enrolled_staff
    post_login(client)

    response = client.post(CODE, {"otp": "000000"})

    assert response.status_code == 200
    assert "wrong or already used" in response.content.decode()
    assert not in_admin(client)
    assert active_sessions(staff) == 0


def test_the_right_code_signs_in_and_cannot_be_used_again(client, enrolled_staff):
    staff, secret = enrolled_staff
    post_login(client)
    code = code_now(secret)

    response = client.post(CODE, {"otp": code})

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert in_admin(client)
    assert active_sessions(staff) == 1

    assert client.post("/admin/logout/").status_code == 200
    assert not in_admin(client)
    assert active_sessions(staff) == 0  # the admin's logout ends its LoginSession
    assert post_login(client)["Location"] == CODE
    replayed = client.post(CODE, {"otp": code})
    assert replayed.status_code == 200
    assert "wrong or already used" in replayed.content.decode()
    assert not in_admin(client)


def test_a_recovery_code_signs_in_once(client, staff, next_step):  # noqa: F811
    _, (recovery, *_) = two_factor_on(staff, password=STAFF_PASSWORD)
    post_login(client)

    assert client.post(CODE, {"otp": recovery})["Location"] == "/admin/"
    assert in_admin(client)
    client.post("/admin/logout/")
    post_login(client)
    assert "wrong or already used" in client.post(CODE, {"otp": recovery}).content.decode()


def test_where_the_login_was_going_survives_the_code_page_but_not_to_another_site(
    client, enrolled_staff
):
    _, secret = enrolled_staff
    post_login(client, next="/admin/accounts/loginsession/")
    assert client.post(CODE, {"otp": code_now(secret)})["Location"] == (
        "/admin/accounts/loginsession/"
    )
    client.post("/admin/logout/")

    post_login(client, next="https://elsewhere.example/admin/")
    assert client.post(CODE, {"otp": code_now(secret, steps=1)})["Location"] == "/admin/"


def test_the_code_page_without_a_right_password_or_after_five_minutes_is_the_login(
    client, enrolled_staff, clock
):
    _, secret = enrolled_staff
    assert client.get(CODE)["Location"] == LOGIN
    assert client.post(CODE, {"otp": code_now(secret)})["Location"] == LOGIN

    post_login(client)
    clock.advance(seconds=admin_signin.PENDING_SECONDS + 1)

    assert client.post(CODE, {"otp": code_now(secret)})["Location"] == LOGIN
    assert not in_admin(client)


def test_staff_no_longer_staff_while_the_code_is_awaited_get_the_login(client, enrolled_staff):
    staff, secret = enrolled_staff
    post_login(client)
    staff.is_staff = False
    staff.save(update_fields=["is_staff"])

    assert client.post(CODE, {"otp": code_now(secret)})["Location"] == LOGIN
    assert admin_signin.PENDING_KEY not in client.session
    assert active_sessions(staff) == 0


def test_wrong_codes_past_the_limit_answer_429_and_then_the_right_one_too(
    client, enrolled_staff, settings
):
    staff, secret = enrolled_staff
    settings.RATE_LIMIT_OTP_PER_USER = "3/h"
    post_login(client)

    answers = [client.post(CODE, {"otp": f"00000{n}"}).status_code for n in range(3)]
    right = client.post(CODE, {"otp": code_now(secret)})

    assert answers == [200, 200, 200]
    assert right.status_code == 429
    assert int(right["Retry-After"]) > 0
    assert "Too many login attempts" in right.content.decode()
    assert not in_admin(client)
    assert active_sessions(staff) == 0


# --- the rate limits --------------------------------------------------------------------------
def test_forty_wrong_passwords_from_one_address_answer_429_and_the_right_one_after_too(
    client, staff
):
    answers = [post_login(client, password=f"wrong-{n}") for n in range(40)]
    right = post_login(client)

    statuses = [a.status_code for a in answers]
    assert statuses == [200] * 10 + [429] * 30  # RATE_LIMIT_AUTH_PER_EMAIL, 10/m
    assert "correct email and password" in answers[0].content.decode()
    for refused in [*answers[10:], right]:
        assert int(refused["Retry-After"]) > 0
        assert "Too many login attempts" in refused.content.decode()
        assert "correct email and password" not in refused.content.decode()
    assert right.status_code == 429
    assert not in_admin(client)
    assert active_sessions(staff) == 0


def test_forty_addresses_tried_from_one_ip_answer_429_and_the_right_one_after_too(client, staff):
    answers = [post_login(client, email=f"guess{n}@example.com") for n in range(40)]
    right = post_login(client)

    assert [a.status_code for a in answers] == [200] * 30 + [429] * 10  # per IP, 30/m
    assert right.status_code == 429
    assert int(right["Retry-After"]) > 0
    assert not in_admin(client)
    # Another network is not held back by this one's flood.
    assert post_login(client, ip="10.0.0.2")["Location"] == "/admin/"


def test_the_limit_per_address_holds_however_the_address_is_spelt(client, staff):
    spellings = [
        " Staff@Example.com\t",
        "STAFF@EXAMPLE.COM",
        "staff@example.com ",
        "\nstaff@Example.COM",
    ]
    answers = [
        post_login(client, email=spellings[n % len(spellings)], password="wrong", ip=f"10.1.0.{n}")
        for n in range(10)
    ]
    right = post_login(client, email=" Staff@Example.com\t", ip="10.2.0.1")

    assert [a.status_code for a in answers] == [200] * 10
    assert right.status_code == 429
    assert not in_admin(client)


def test_a_spelling_of_the_address_signs_in_like_the_address(client, staff):
    assert post_login(client, email=" Staff@Example.com\t")["Location"] == "/admin/"
    assert in_admin(client)


# --- who may come in --------------------------------------------------------------------------
def test_a_user_who_is_not_staff_is_refused_and_keeps_no_session(client):
    customer = UserFactory(email="customer@example.com")

    response = post_login(client, email=customer.email, password=DEFAULT_PASSWORD)

    assert response.status_code == 200
    assert "correct email and password for a staff account" in response.content.decode()
    assert client.get("/admin/")["Location"].startswith(LOGIN)
    assert active_sessions(customer) == 0


def test_a_user_with_a_factor_who_is_not_staff_is_refused_before_any_code(client, next_step):  # noqa: F811
    customer = UserFactory(email="customer@example.com")
    two_factor_on(customer)

    response = post_login(client, email=customer.email, password=DEFAULT_PASSWORD)

    assert response.status_code == 200
    assert "correct email and password for a staff account" in response.content.decode()
    assert client.get(CODE)["Location"] == LOGIN


def test_a_wrong_password_gets_djangos_refusal(client, staff):
    response = post_login(client, password="not-the-password")

    assert response.status_code == 200
    assert "correct email and password for a staff account" in response.content.decode()
    assert not in_admin(client)


# --- REQUIRE_STAFF_2FA ------------------------------------------------------------------------
def test_with_staff_2fa_required_staff_without_a_factor_get_the_enrolment_page(
    client, staff, settings
):
    settings.REQUIRE_STAFF_2FA = True

    response = post_login(client)

    assert response.status_code == 403
    page = response.content.decode()
    assert "Turn on two-step login first" in page
    assert 'href="/account"' in page
    assert not in_admin(client)
    assert active_sessions(staff) == 0


def test_with_staff_2fa_required_staff_with_a_factor_sign_in_with_the_code(
    client, enrolled_staff, settings
):
    settings.REQUIRE_STAFF_2FA = True
    _, secret = enrolled_staff

    assert post_login(client)["Location"] == CODE
    assert client.post(CODE, {"otp": code_now(secret)})["Location"] == "/admin/"
    assert in_admin(client)


def test_turning_staff_2fa_on_signs_out_the_admins_signed_in_without_a_code(
    client, staff, settings
):
    post_login(client)
    assert in_admin(client)

    settings.REQUIRE_STAFF_2FA = True

    assert not in_admin(client)


def test_without_staff_2fa_required_the_password_alone_signs_staff_without_a_factor_in(
    client, staff, settings
):
    settings.REQUIRE_STAFF_2FA = False

    response = post_login(client)

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert in_admin(client)
    assert active_sessions(staff) == 1


# --- the admin's session ----------------------------------------------------------------------
def test_ending_the_login_session_elsewhere_signs_the_admin_out(client, staff):
    post_login(client)
    assert in_admin(client)

    services.sessions_end_all(user=staff)

    assert not in_admin(client)


def test_a_session_not_made_by_the_admins_login_is_not_accepted(client, staff):
    client.force_login(staff)  # Django's session auth alone, as a sign-in before issue 53 left

    assert not in_admin(client)


def test_no_password_or_code_reaches_the_log(client, enrolled_staff, caplog):
    _, secret = enrolled_staff
    caplog.set_level(logging.DEBUG)
    post_login(client, password="wrong-password-attempt")
    post_login(client)
    client.post(CODE, {"otp": "123456"})
    code = code_now(secret)
    client.post(CODE, {"otp": code})

    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "admin sign-in of staff user" in logged
    for value in (STAFF_PASSWORD, "wrong-password-attempt", "123456", code, secret):
        assert value not in logged
