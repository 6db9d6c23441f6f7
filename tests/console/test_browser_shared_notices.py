"""A member's pages for a number shared with them, in a real browser (issue 57): from the
numbers page to their notices of it, saved with the keyboard's checkboxes, and to its calls
on the history page. Each page is scanned with axe-core."""

import pytest

from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.test_browser_members import log_in
from tests.factories import CallRecordFactory, NumberFactory, NumberMemberFactory, UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


def test_a_member_turns_on_their_notices_and_reads_the_numbers_calls(
    live_server, page, inspector, user
):
    base = live_server.url
    number = NumberFactory(owner=UserFactory(), alias="Shop")
    membership = NumberMemberFactory(number=number, user=user, email=user.email)
    CallRecordFactory(number=number, caller_num="+447700900002", status="missed")

    log_in(page, base, user.email)
    page.goto(f"{base}/numbers")
    with page.expect_navigation():
        page.get_by_role("link", name=f"Your notices of {number.number}").click()
    inspector.look(page, "shared-notices")
    page.get_by_label("Mail me its missed calls").check()
    page.get_by_label("Tell me about its calls in my Matrix room").check()
    submit(page, "Save your notices")
    assert "are saved" in page.inner_text("main")
    membership.refresh_from_db()
    assert (membership.missed_call_email, membership.notify_matrix) == (True, True)
    assert membership.notify_webhook is False

    page.goto(f"{base}/numbers")
    assert "Matrix, missed-call mail" in page.inner_text("main")
    with page.expect_navigation():
        page.get_by_role("link", name=f"Calls of {number.number}").click()
    assert "+447700900002" in page.inner_text("main")
    inspector.look(page, "history-shared")
    assert inspector.violations == []
