"""E-mail verification in the console (issue 39), with Django's test client and the real SMTP
server: sign-up's banner and its resend button, the mailed link's confirm page (a GET changes
nothing: mail scanners follow links), the change-of-address form, and numbers refused while
REQUIRE_EMAIL_VERIFICATION waits."""

import pytest
from django.test import Client

from accounts.models import User
from accounts.verification import verification_token_make
from tests.console.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-and-unusual-passphrase"
VERIFY_PREFIX = "http://testserver/verify-email/"
BANNER = 'class="verify-banner"'


def verify_path(mailbox, address: str) -> str:
    links = [link for link in mailbox.only(address).links() if link.startswith(VERIFY_PREFIX)]
    assert len(links) == 1
    return links[0].removeprefix("http://testserver")


def test_sign_up_shows_a_banner_until_the_mailed_link_is_confirmed(client, mailbox):
    registered = client.post("/register", {"email": "new@example.com", "password": PASSWORD})
    assert registered.status_code == 302
    numbers = client.get("/numbers", follow=True).content.decode()
    assert "confirm new@example.com by the link we mailed to it" in numbers
    assert BANNER in numbers and "Open the link we mailed to new@example.com" in numbers
    path = verify_path(mailbox, "new@example.com")

    shown = client.get(path)

    assert shown.status_code == 200
    assert shown["Cache-Control"] == "no-store" and shown["Referrer-Policy"] == "same-origin"
    assert "Confirm my address" in shown.content.decode()
    assert User.objects.get(email="new@example.com").email_verified is False  # GET: nothing
    confirmed = client.post(path)
    assert confirmed.status_code == 302 and confirmed["Location"] == "/account"
    account = client.get("/account").content.decode()
    assert "new@example.com is confirmed as your address." in account
    assert "(verified)" in account and BANNER not in account
    assert User.objects.get(email="new@example.com").email_verified is True


def test_a_link_opened_signed_out_confirms_and_sends_to_log_in(client, user, mailbox):
    token = verification_token_make(user=user)

    response = client.post(f"/verify-email/{token}")

    assert response.status_code == 302 and response["Location"] == "/login"
    user.refresh_from_db()
    assert user.email_verified is True


def test_a_used_or_unknown_link_says_so_with_a_400(client, user):
    token = verification_token_make(user=user)
    assert client.post(f"/verify-email/{token}").status_code == 302

    again = client.post(f"/verify-email/{token}")
    garbage = client.post("/verify-email/%00%ED%A0%80" + "x" * 5000)

    assert again.status_code == 400
    assert "This verification link is not valid" in again.content.decode()
    assert garbage.status_code == 400


def test_the_confirm_form_needs_its_csrf_token(user):
    browser = Client(enforce_csrf_checks=True)

    response = browser.post(f"/verify-email/{verification_token_make(user=user)}")

    assert response.status_code == 403
    user.refresh_from_db()
    assert user.email_verified is False


def test_the_banners_button_mails_the_link_again_and_is_rate_limited(
    browser_client, user, mailbox, settings
):
    settings.RATE_LIMIT_VERIFICATION_MAIL_PER_USER = "1/h"
    assert BANNER in browser_client.get("/history").content.decode()

    sent = browser_client.post("/account/verify-email/resend", {"next": "/history"})
    limited = browser_client.post("/account/verify-email/resend", {"next": "/history"})

    assert sent.status_code == 302 and sent["Location"] == "/history"
    page = browser_client.get("/history").content.decode()
    assert f"We mailed the link again to {user.email}." in page
    assert "Too many requests" in page
    assert limited.status_code == 302
    assert verify_path(mailbox, user.email).startswith("/verify-email/")


def test_a_verified_user_sees_no_banner(browser_client, user):
    User.objects.filter(pk=user.pk).update(email_verified=True)

    assert BANNER not in browser_client.get("/numbers").content.decode()


def test_the_account_page_changes_the_address_once_the_new_one_is_confirmed(
    browser_client, user, mailbox
):
    old = user.email
    User.objects.filter(pk=user.pk).update(email_verified=True)
    assert 'href="/account/email"' in browser_client.get("/account").content.decode()

    wrong = browser_client.post(
        "/account/email", {"email": "moved@example.com", "password": "not-it"}
    )
    assert wrong.status_code == 403
    assert "The current password is wrong." in wrong.content.decode()
    changed = browser_client.post(
        "/account/email", {"email": "moved@example.com", "password": DEFAULT_PASSWORD}
    )
    assert changed.status_code == 302
    account = browser_client.get("/account").content.decode()
    assert "We mailed a link to moved@example.com" in account
    assert "Your account moves to moved@example.com" in account  # the banner
    assert "moved@example.com" in mailbox.only(old).text  # the old address is told

    browser_client.post(verify_path(mailbox, "moved@example.com"))

    user.refresh_from_db()
    assert (user.email, user.email_verified, user.email_pending) == (
        "moved@example.com",
        True,
        "",
    )
    fresh = Client()
    assert fresh.post("/login", {"email": "moved@example.com", "password": DEFAULT_PASSWORD})[
        "Location"
    ].startswith("/numbers")


def test_an_address_another_account_has_is_refused_by_the_field(browser_client, other_user):
    response = browser_client.post(
        "/account/email", {"email": other_user.email, "password": DEFAULT_PASSWORD}
    )

    assert response.status_code == 409
    assert "This e-mail address is already registered." in response.content.decode()


def test_required_the_number_form_says_to_confirm_first(settings, client, user, inventory, mailbox):
    settings.REQUIRE_EMAIL_VERIFICATION = True
    sign_in(client, user)
    assert "Until you do, you cannot take a number" in client.get("/numbers").content.decode()
    page = client.get("/numbers/new").content.decode()
    challenge = {name: page.split(f'name="{name}" value="')[1].split('"')[0] for name in ("a", "b")}
    challenge_id = page.split('name="challengeId" value="')[1].split('"')[0]
    answer = int(challenge["a"]) + int(challenge["b"])

    response = client.post(
        "/numbers/new",
        {
            "alias": "Office",
            "pin": "1234",
            "answer": answer,
            **challenge,
            "challengeId": challenge_id,
        },
    )

    assert response.status_code == 403
    assert "Confirm your e-mail address first" in response.content.decode()
    assert not user.numbers.exists()
