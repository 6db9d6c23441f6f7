"""The history pages in a real browser: the list and its filters, a refused filter, the
voicemail playing in its <audio> element through the session (and to no one signed out),
marking it heard, deleting it after the confirmation. Each page is scanned with axe-core."""

import pytest

from history.services import record_inbound_call
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import PLAYABLE, log_in, off_the_loop
from tests.factories import NumberFactory, UserFactory, voicemail_on
from tests.records import record_get, refreshed

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]

SECONDS = 2.5  # the message's length, which the player must report


def test_the_owner_plays_marks_and_deletes_a_message(live_server, browser, page, inspector, user):
    base = live_server.url
    number = NumberFactory(owner=user, alias="Office")
    off_the_loop(
        record_inbound_call, number=number, caller_num="+447700900001", status="missed", duration=0
    )
    message = off_the_loop(voicemail_on, number=number, seconds=SECONDS)
    log_in(page, base, user, then="/history")
    assert "+447700900001" in page.inner_text("main")
    inspector.look(page, "history")

    page.wait_for_function(PLAYABLE, arg=SECONDS)  # Playwright's wait, not a sleep
    src = page.get_attribute("audio", "src")
    assert src == f"/history/{message.pk}/recording"
    with browser.new_context() as stranger:  # not signed in: the same URL gives no audio
        response = stranger.request.get(f"{base}{src}", max_redirects=0)
        assert response.status == 302 and "audio" not in response.headers["content-type"]
        assert response.headers["location"].startswith("/login?next=")

    response = page.goto(f"{base}/history?status=lost")
    assert response.status == 400
    assert "is not a valid choice" in page.inner_text("#id_status_errors")
    inspector.look(page, "history-refused")

    page.select_option("#id_status", "answered")
    page.select_option("#id_number_id", str(number.pk))
    submit(page, "Show the calls")
    assert "+447700900001" not in page.inner_text("main")
    submit(page, "Mark heard")
    assert "is marked heard" in page.inner_text("[role=status]")
    assert page.url.endswith(f"status=answered&number_id={number.pk}")
    page.click("a:text('Delete the message')")
    inspector.look(page, "history-delete")
    submit(page, "Delete the message")
    message = refreshed(message)
    assert (message.heard, message.recording) == (True, "")
    assert page.locator("audio").count() == 0
    inspector.look(page, "history-after-delete")
    assert inspector.violations == []


def test_another_users_message_is_the_404_page(live_server, page, inspector, user):
    theirs = off_the_loop(voicemail_on, number=NumberFactory(owner=UserFactory()))
    log_in(page, live_server.url, user)

    response = page.goto(f"{live_server.url}/history/{theirs.pk}/delete")

    assert response.status == 404
    inspector.look(page, "history-not-found")
    assert record_get(pk=theirs.pk).recording
    assert inspector.violations == []
