"""Sharing a number in a real browser (issue 57): the owner invites from the members page, the
invitee follows the mailed link signed out, logs in through the page's link, comes back and
accepts; then the number shows under "Shared with you". Each page is scanned with axe-core."""

import pytest

from mail.models import OutboundMail
from tests.browser import NEEDS_CHROMIUM, submit
from tests.factories import DEFAULT_PASSWORD, NumberFactory, UserFactory
from virtual_numbers.models import NumberMember

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


def log_in(page, base, email, path="/login"):
    page.goto(f"{base}{path}")
    page.fill("#id_email", email)
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Log in")


def test_the_owner_invites_and_the_invitee_accepts(live_server, page, inspector, user):
    base = live_server.url
    number = NumberFactory(owner=user, alias="Shop")
    UserFactory(email="sam@example.com")

    log_in(page, base, user.email)
    page.goto(f"{base}/numbers/{number.pk}/members")
    inspector.look(page, "members-empty")
    page.fill("#id_email", "sam@example.com")
    page.select_option("#id_role", "member")
    submit(page, "Send the invitation")
    assert "sam@example.com" in page.inner_text("main")
    inspector.look(page, "members-invited")
    submit(page, "Log out")

    mail = OutboundMail.objects.get(to="sam@example.com")
    link = next(word for word in mail.text_body.split() if "/invitations/" in word)
    path = link[link.index("/invitations/") :]
    page.goto(f"{base}{path}")
    inspector.look(page, "invitation-signed-out")
    with page.expect_navigation():
        page.click("a:text('Log in')")
    page.fill("#id_email", "sam@example.com")
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Log in")
    assert page.url == f"{base}{path}"
    inspector.look(page, "invitation-signed-in")
    submit(page, "Accept the invitation")
    assert page.url == f"{base}/numbers"
    assert "Shared with you" in page.inner_text("main")
    inspector.look(page, "numbers-shared")

    page.goto(f"{base}{path}")  # used: says so
    assert "This invitation does not work" in page.inner_text("main")
    inspector.look(page, "invitation-invalid")
    assert NumberMember.objects.get().status == "active"
    assert inspector.violations == []
