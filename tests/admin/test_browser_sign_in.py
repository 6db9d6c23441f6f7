"""The admin's sign-in in Chromium (issue 53, finding 1): the attack of the finding replayed
through the admin's own login form, and seen refused.

- A staff member with two-step login on types the password: the admin asks for the code on
  a page of its own, refuses a wrong one, and opens its index for the right one.
- Forty wrong passwords in a row from this browser: the stock error for the first ten, then
  a 429 page with Retry-After, and the right password right after is refused too.
- With REQUIRE_STAFF_2FA on, staff without a factor land on the page that sends them to the
  console's account page to turn one on, and never in the admin.

Screenshots go where tests/admin/test_browser.py puts its own.
"""

import pyotp
import pytest
from django.utils import timezone

from accounts.models import LoginSession, User
from tests.accounts.test_two_factor import code_now, next_step  # noqa: F401 - a fixture
from tests.admin.test_browser import shot
from tests.browser import NEEDS_CHROMIUM
from tests.factories import two_factor_on

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]

STAFF_EMAIL = "staff@example.com"
STAFF_PASSWORD = "staff-password-long-enough"


@pytest.fixture
def staff(db):
    return User.objects.create_superuser(STAFF_EMAIL, STAFF_PASSWORD)


def submit_login(page, base: str, email: str, password: str):
    """The admin's login form filled and sent; the response of the page it leads to."""
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", email)
    page.fill("#id_password", password)
    with page.expect_navigation() as navigation:
        page.click("input[type=submit]")
    return navigation.value


def test_staff_with_two_step_login_give_the_code_after_the_password(
    live_server,
    page,
    staff,
    next_step,  # noqa: F811 - the fixture imported above
):
    base = live_server.url
    secret, _ = two_factor_on(staff, password=STAFF_PASSWORD)
    next_step()  # the confirming code is spent; the server's clock is the test's

    submit_login(page, base, STAFF_EMAIL, STAFF_PASSWORD)

    assert page.url == f"{base}/admin/login/code/"
    assert page.locator("input[type=password]").count() == 0
    assert not LoginSession.objects.filter(user=staff).exists()
    shot(page, "sign-in-code")
    response = page.goto(f"{base}/admin/accounts/user/")  # the password alone opens nothing
    assert page.url.startswith(f"{base}/admin/login/")
    assert response.status == 200 and page.locator("#id_password").count() == 1

    page.goto(f"{base}/admin/login/code/")
    page.fill("#id_otp", "000000")
    with page.expect_navigation():
        page.click("input[type=submit]")
    assert "wrong or already used" in page.inner_text("#code-error")
    shot(page, "sign-in-code-refused")

    page.fill("#id_otp", pyotp.TOTP(secret).at(timezone.now()))
    with page.expect_navigation():
        page.click("input[type=submit]")

    assert page.url == f"{base}/admin/"
    assert page.inner_text("#state-users") == "1"
    assert LoginSession.objects.filter(user=staff, active=True).count() == 1
    shot(page, "sign-in-index")


def test_forty_wrong_passwords_answer_429_and_the_right_one_after_is_refused(
    live_server, page, staff
):
    base = live_server.url

    statuses = [
        submit_login(page, base, STAFF_EMAIL, f"wrong-password-{n}").status for n in range(40)
    ]
    right = submit_login(page, base, STAFF_EMAIL, STAFF_PASSWORD)

    assert statuses == [200] * 10 + [429] * 30
    assert right.status == 429
    assert int(right.header_value("Retry-After")) > 0
    assert "Too many login attempts" in page.inner_text("#rate-limited")
    shot(page, "sign-in-rate-limited")
    page.goto(f"{base}/admin/")
    assert page.url.startswith(f"{base}/admin/login/")
    assert not LoginSession.objects.filter(user=staff).exists()


def test_staff_without_a_factor_are_sent_to_turn_one_on_when_it_is_required(
    live_server, page, staff, settings
):
    settings.REQUIRE_STAFF_2FA = True
    base = live_server.url

    response = submit_login(page, base, STAFF_EMAIL, STAFF_PASSWORD)

    assert response.status == 403
    assert "Turn on two-step login first" in page.inner_text("#two-factor-required")
    shot(page, "sign-in-two-factor-required")
    with page.expect_navigation():
        page.click("#enrol-link")
    assert page.url == f"{base}/login?next=/account"  # the console's, then its account page
    page.goto(f"{base}/admin/")
    assert page.url.startswith(f"{base}/admin/login/")
