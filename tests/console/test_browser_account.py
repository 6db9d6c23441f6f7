"""The account pages in a real browser: each scanned with axe-core (no serious or critical
violation) and shot at desktop and phone width; the Copy button puts the API key on the
clipboard."""

import json
import zipfile

import pytest

from accounts.models import User
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import log_in
from tests.factories import DEFAULT_PASSWORD
from webhooks.models import WebhookEndpoint
from webhooks.selectors import webhook_secret

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


def test_the_account_page_copies_the_key_and_passes_the_scan(live_server, page, inspector, user):
    base = live_server.url
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    log_in(page, base, user, then="/account")
    inspector.look(page, "account")
    assert user.api_key not in page.content()

    page.click("a:text('Reveal the API key')")
    inspector.look(page, "api-key-reveal")
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Reveal the API key")
    assert page.input_value("#api-key") == user.api_key
    inspector.look(page, "api-key-shown")
    page.click("button:text('Copy the API key')")
    status = page.locator("#copy-status")
    status.filter(has_text="Copied the API key.").wait_for()
    assert page.evaluate("() => navigator.clipboard.readText()") == user.api_key

    page.goto(f"{base}/account")
    page.click("a:text('Regenerate the API key')")
    inspector.look(page, "api-key-regenerate")
    submit(page, "Regenerate the API key")
    user.refresh_from_db()
    assert page.input_value("#api-key") == user.api_key
    assert "Your API key is replaced" in page.inner_text("[role=status]")
    assert inspector.violations == []


def test_the_matrix_and_webhook_pages_pass_the_scan(live_server, page, inspector, user):
    base = live_server.url
    log_in(page, base, user, then="/account")

    page.click("a:text('Change the Matrix id and notices')")
    page.fill("#id_matrixId", "Alice")
    submit(page, "Save the Matrix id")
    assert "Not a valid Matrix user ID." in page.inner_text("#id_matrixId_errors")
    inspector.look(page, "matrix-refused")
    page.goto(f"{base}/account")

    page.click("a:text('Set a webhook')")
    page.fill("#id_url", "http://127.0.0.1/hook")
    submit(page, "Save the webhook")
    assert "public addresses" in page.inner_text("#id_url_errors")
    inspector.look(page, "webhook-refused")
    page.fill("#id_url", "https://8.8.8.8/relay-events")
    page.check("#id_events_0")
    submit(page, "Save the webhook")
    endpoint = WebhookEndpoint.objects.get(user=user)
    assert page.input_value("#webhook-secret") == webhook_secret(endpoint)
    inspector.look(page, "webhook-secret")

    page.goto(f"{base}/account")
    page.click("a:text('Rotate the webhook secret')")
    inspector.look(page, "webhook-rotate")
    page.goto(f"{base}/account/webhook")
    inspector.look(page, "webhook")
    page.goto(f"{base}/account/webhook/delete")
    inspector.look(page, "webhook-delete")
    assert inspector.violations == []


def test_changing_and_recovering_the_password_pass_the_scan(
    live_server, page, inspector, user, mailbox
):
    base = live_server.url
    log_in(page, base, user, then="/account")
    page.click("a:text('Change your password')")
    inspector.look(page, "password-change")
    page.fill("#id_currentPassword", "not-the-password")
    page.fill("#id_newPassword", "a-brand-new-passphrase")
    submit(page, "Change the password")
    assert "The current password is wrong." in page.inner_text("#id_currentPassword_errors")
    inspector.look(page, "password-change-refused")
    page.fill("#id_currentPassword", DEFAULT_PASSWORD)
    page.fill("#id_newPassword", "a-brand-new-passphrase")
    submit(page, "Change the password")
    assert "Your password is changed" in page.inner_text("[role=status]")

    submit(page, "Log out")
    page.click("a:text('Forgot your password?')")
    inspector.look(page, "password-reset")
    page.fill("#id_email", user.email)
    submit(page, "Mail me a link")
    inspector.look(page, "password-reset-sent")
    (link,) = [m for m in mailbox.delivered() if "Reset" in m.message["Subject"]][0].links()
    page.goto(link.replace("http://testserver", base))
    inspector.look(page, "password-reset-confirm")
    page.fill("#id_newPassword", "recovered-passphrase-1")
    submit(page, "Set the password")
    assert "Log in with it." in page.inner_text("[role=status]")
    page.goto(link.replace("http://testserver", base))
    assert "This link does not work" in page.inner_text("h1")
    inspector.look(page, "password-reset-invalid")
    user.refresh_from_db()
    assert user.check_password("recovered-passphrase-1")
    assert inspector.violations == []


def test_confirming_the_address_downloading_and_deleting_pass_the_scan(
    live_server, page, inspector, user, mailbox
):
    base = live_server.url
    log_in(page, base, user, then="/account")
    banner = page.locator("section.verify-banner")
    assert f"Open the link we mailed to {user.email}" in banner.inner_text()
    submit(page, "Mail me the link again")
    inspector.look(page, "verify-resent")
    (link,) = [m for m in mailbox.delivered() if "Confirm" in m.message["Subject"]][-1].links()
    page.goto(link)
    inspector.look(page, "verify-email")
    submit(page, "Confirm my address")
    assert f"{user.email} is confirmed as your address." in page.inner_text("[role=status]")
    page.goto(f"{base}/account")
    assert page.locator("section.verify-banner").count() == 0
    user.refresh_from_db()
    assert user.email_verified

    with page.expect_download() as downloading:
        page.click("button:text('Download my data')")
    with zipfile.ZipFile(downloading.value.path()) as archive:
        account = json.loads(archive.read("account.json"))
    assert account["profile"]["email"] == user.email

    page.click("a:text('Delete my account')")
    inspector.look(page, "account-delete")
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Delete my account")
    assert "Your account is deleted" in page.inner_text("[role=status]")
    assert not User.objects.filter(pk=user.pk).exists()
    assert inspector.violations == []
