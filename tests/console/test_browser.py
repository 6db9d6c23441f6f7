"""The console in a real browser (Playwright driving Debian's Chromium), as a new user works
it: register, take a number through the CAPTCHA, rename it, change its PIN, give it back, log
out. Each page is scanned with axe-core (no serious or critical violation) and shot at
desktop and phone width into $TEST_ARTIFACTS_DIR/console/ when that is set, else the test's
temporary directory: a test run leaves the checkout as it found it."""

import pytest
from django.contrib.auth.hashers import check_password

from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import answer_the_captcha
from virtual_numbers.models import Number

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


def test_a_new_user_takes_a_number_and_gives_it_back(live_server, page, inspector, inventory):
    base = live_server.url
    page.goto(f"{base}/")  # signed out: sent to log in
    assert page.url.startswith(f"{base}/login")
    inspector.look(page, "login")
    page.click("a:text('Create an account')")
    page.fill("#id_email", "new@example.com")
    page.fill("#id_password", "password")
    submit(page, "Create the account")
    assert "This password is too common." in page.inner_text("#id_password_errors")
    inspector.look(page, "register-refused")
    page.fill("#id_password", "a-long-passphrase")
    submit(page, "Create the account")
    assert page.url == f"{base}/numbers"
    inspector.look(page, "numbers-empty")

    page.click("a:text('Take a number')")
    inspector.look(page, "take-a-number")
    page.fill("#id_alias", "Office")
    page.fill("#id_pin", "4821")
    page.fill("#id_answer", "0")
    submit(page, "Take the number")
    assert "The CAPTCHA answer is wrong." in page.inner_text("#id_answer_errors")
    inspector.look(page, "take-a-number-refused")
    page.fill("#id_pin", "4821")
    answer_the_captcha(page)
    submit(page, "Take the number")
    number = Number.objects.get(owner__email="new@example.com")
    assert f"{number.number} is yours." in page.inner_text("[role=status]")
    inspector.look(page, "numbers")

    page.click("a:text('Rename')")
    inspector.look(page, "rename")
    page.fill("#id_alias", "Shop")
    submit(page, "Save the alias")
    assert "Shop" in page.inner_text(".card h2")
    page.click("a:text('Change the PIN')")
    page.fill("#id_currentPin", "1234")
    page.fill("#id_newPin", "739155")
    submit(page, "Change the PIN")
    assert "The current PIN is wrong." in page.inner_text("#id_currentPin_errors")
    inspector.look(page, "change-the-pin-refused")
    page.fill("#id_currentPin", "4821")
    page.fill("#id_newPin", "739155")
    submit(page, "Change the PIN")
    number.refresh_from_db()
    assert check_password("739155", number.pin_hash)

    page.click("a:text('Give back')")
    inspector.look(page, "give-back")
    submit(page, "Give it back")
    assert not Number.objects.filter(pk=number.pk).exists()
    submit(page, "Log out")
    assert page.url == f"{base}/login"
    assert inspector.violations == []


def test_the_refusal_and_not_found_pages_pass_the_scan(live_server, page, inspector, user):
    from tests.factories import DEFAULT_PASSWORD, NumberFactory

    mine, theirs = NumberFactory(owner=user), NumberFactory()
    page.goto(f"{live_server.url}/login")
    page.fill("#id_email", user.email)
    page.fill("#id_password", "wrong-password-1")
    submit(page, "Log in")
    assert "Wrong e-mail or password." in page.inner_text("[role=alert]")
    inspector.look(page, "login-refused")
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Log in")

    page.goto(f"{live_server.url}/numbers/{mine.pk}/pin")
    inspector.look(page, "change-the-pin")
    response = page.goto(f"{live_server.url}/numbers/{theirs.pk}/alias")
    assert response.status == 404
    inspector.look(page, "not-found")
    assert inspector.violations == []


def test_the_login_form_is_worked_by_keyboard_with_a_visible_focus(live_server, page):
    page.goto(f"{live_server.url}/login")
    reached = []
    for _ in range(6):
        page.keyboard.press("Tab")
        reached.append(
            page.evaluate(
                "() => [document.activeElement.id || document.activeElement.textContent.trim(),"
                " getComputedStyle(document.activeElement).outlineStyle]"
            )
        )

    assert [name for name, _ in reached] == [
        "Skip to the page",
        "id_email",
        "id_password",
        "Log in",
        "Forgot your password?",
        "Create an account",
    ]
    assert all(outline != "none" for _, outline in reached)
