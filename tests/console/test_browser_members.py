"""Sharing a number in a real browser (issue 57): the owner invites from the members page, the
invitee follows the mailed link signed out, logs in (or signs up) through the page's link,
comes back and accepts; then the number shows under "Shared with you", and its calls and
voicemail in the member's history. Each page is scanned with axe-core."""

import pytest

from mail.models import OutboundMail
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import PLAYABLE, off_the_loop
from tests.factories import DEFAULT_PASSWORD, NumberFactory, UserFactory, voicemail_on
from virtual_numbers.models import NumberMember

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]

SECONDS = 1.5  # the voicemail's length, which the member's player must report


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


def test_a_new_member_signs_up_through_the_mailed_link_and_hears_the_numbers_voicemail(
    live_server, page, inspector, user, mailbox
):
    # Two accounts in Chromium (issue 57): the owner invites an address with no account; the
    # invitation goes out by mail (aiosmtpd); its reader signs up through the link's page,
    # accepts, and then finds the number's call in their history and plays its voicemail.
    base = live_server.url
    number = NumberFactory(owner=user, alias="Shop")
    off_the_loop(voicemail_on, number=number, seconds=SECONDS, caller="+447700900123")

    log_in(page, base, user.email)
    page.goto(f"{base}/numbers/{number.pk}/members")
    page.fill("#id_email", "new.member@example.com")
    page.select_option("#id_role", "member")
    submit(page, "Send the invitation")
    submit(page, "Log out")

    invitation = off_the_loop(mailbox.only, to="new.member@example.com")
    [link] = [link for link in invitation.links() if "/invitations/" in link]
    path = link[link.index("/invitations/") :]
    page.goto(f"{base}{path}")
    with page.expect_navigation():
        page.click("a:text('Create an account')")
    page.fill("#id_email", "new.member@example.com")
    page.fill("#id_password", "a-long-passphrase-for-the-shop")
    submit(page, "Create the account")
    assert page.url == f"{base}{path}"  # back to the invitation, signed in
    submit(page, "Accept the invitation")
    assert page.url == f"{base}/numbers"

    with page.expect_navigation():
        page.get_by_role("link", name=f"Calls of {number.number}").click()
    assert "+447700900123" in page.inner_text("main")
    inspector.look(page, "history-new-member")
    page.wait_for_function(PLAYABLE, arg=SECONDS)  # the voicemail loads in its player
    src = page.get_attribute("audio", "src")
    played = page.request.get(f"{base}{src}")
    assert (played.status, played.headers["content-type"]) == (200, "audio/wav")
    assert played.body()[:4] == b"RIFF"
    member = off_the_loop(lambda: NumberMember.objects.select_related("user").get())
    assert (member.status, member.user.email) == ("active", "new.member@example.com")
    assert inspector.violations == []
