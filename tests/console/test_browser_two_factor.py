"""Two-step login in a real browser: turned on from the account page (the QR code drawn from
inline markup), then a log-in in two steps; every page scanned with axe-core and shot at
desktop and phone width."""

import pyotp
import pytest
from django.utils import timezone

from accounts.models import TotpDevice
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import log_in
from tests.factories import DEFAULT_PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


def test_turning_on_two_step_login_and_logging_in_with_a_code(
    live_server, page, inspector, user, clock
):
    base = live_server.url
    log_in(page, base, user, then="/account")
    page.click("a:text('Turn on two-step login')")
    inspector.look(page, "two-factor-password")
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Continue")
    assert page.url == f"{base}/account/2fa"
    assert page.locator(".qr svg").bounding_box()["width"] > 100  # drawn, not blocked
    inspector.look(page, "two-factor-enrol")

    secret = page.input_value("#totp-secret")
    page.fill("#id_code", "000000")
    submit(page, "Turn on two-step login")
    assert "wrong or already used" in page.inner_text("#id_code_errors")
    inspector.look(page, "two-factor-enrol-refused")
    page.fill("#id_code", pyotp.TOTP(secret).at(timezone.now()))
    submit(page, "Turn on two-step login")
    codes = page.locator(".recovery-codes code").all_inner_texts()
    assert len(codes) == 10
    assert TotpDevice.objects.get(user=user).confirmed_at is not None
    inspector.look(page, "two-factor-recovery-codes")

    page.goto(f"{base}/account")
    assert "Recovery codes left: 10" in page.inner_text("#main")
    submit(page, "Log out")
    clock.advance(seconds=30)  # the live server's clock too: the confirming code is spent
    page.goto(f"{base}/login?next=/history")
    page.fill("#id_email", user.email)
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Log in")
    assert page.url == f"{base}/login/code"
    assert page.locator("input[type=password]").count() == 0
    inspector.look(page, "login-code")
    page.fill("#id_otp", pyotp.TOTP(secret).at(timezone.now()))
    submit(page, "Log in")
    assert page.url == f"{base}/history"

    page.goto(f"{base}/account/2fa/disable")
    inspector.look(page, "two-factor-disable")
    assert inspector.violations == []
