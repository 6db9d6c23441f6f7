"""Recording of bridged calls (issue 58) in a real browser (Playwright driving Debian's
Chromium): the owner turns recording on for a number from its card, a refused announcement
said on its field, then plays a recorded call's recording in the history page (its <audio>
element through the session, not to a browser signed out), reads its transcript by speaker
and deletes it after the confirmation. Each page is scanned with axe-core."""

import pytest

from calls.models import Recording
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import log_in, off_the_loop
from tests.factories import NumberFactory, call_recorded_on
from virtual_numbers.models import Number

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]

SECONDS = 2.5  # the recording's length, which the player must report

# True once the page's first <audio> element has loaded a recording `seconds` long.
LOADED = """(seconds) => {
    const audio = document.querySelector("audio");
    if (!audio.dataset.loading) { audio.dataset.loading = "1"; audio.load(); }
    return audio.readyState >= 1 && Math.abs(audio.duration - seconds) < 0.05;
}"""
# True once that element has played past `seconds` of it.
PLAYED = """(seconds) => document.querySelector("audio").currentTime > seconds"""


def test_turning_recording_on_and_playing_a_recorded_call(
    live_server, browser, page, inspector, user
):
    base = live_server.url
    number = NumberFactory(owner=user, alias="Office")
    log_in(page, base, user)
    page.click(f"a:has-text('Call recording of {number.number}')")
    assert "Forwarded calls are not recorded." in page.inner_text(".current")
    assert "differs from country to country" in page.inner_text("main")
    inspector.look(page, "call-recording-off")

    page.check("#id_enabled")
    page.fill("#id_announce", "a" * 501)
    submit(page, "Save the call recording")
    assert "at most 500 characters" in page.inner_text("#id_announce_errors")
    assert not Number.objects.get(pk=number.pk).recording_enabled
    inspector.look(page, "call-recording-refused")

    page.fill("#id_announce", "Calls to the office are recorded.")
    submit(page, "Save the call recording")
    assert "are recorded" in page.inner_text("[role=status]")
    assert "Calls to the office are recorded." in page.inner_text(".current")
    saved = Number.objects.get(pk=number.pk)
    assert (saved.recording_enabled, saved.recording_announce) == (
        True,
        "Calls to the office are recorded.",
    )
    inspector.look(page, "call-recording-on")

    recording = off_the_loop(
        call_recorded_on,
        number=number,
        seconds=SECONDS,
        transcript="caller: is the parcel ready\ncallee: yes it is",
        transcript_confidence=0.8,
    )
    page.goto(f"{base}/history")
    card = page.inner_text(".call-recording")
    assert "Call recording, 2.5 s" in card
    assert "Caller: is the parcel ready" in card and "Callee: yes it is" in card
    inspector.look(page, "history-call-recording")

    page.wait_for_function(LOADED, arg=SECONDS)  # Playwright's waits, not a sleep
    src = page.get_attribute("audio", "src")
    assert src == f"/call-recordings/{recording.pk}"
    page.evaluate("document.querySelector('audio').play()")
    page.wait_for_function(PLAYED, arg=0.5)
    with browser.new_context() as stranger:  # not signed in: the same URL gives no audio
        response = stranger.request.get(f"{base}{src}", max_redirects=0)
        assert response.status == 302 and "audio" not in response.headers["content-type"]

    page.click("a:text('Delete the recording')")
    inspector.look(page, "call-recording-delete")
    submit(page, "Delete the recording")
    assert "is deleted" in page.inner_text("[role=status]")
    assert page.locator("audio").count() == 0
    assert not Recording.objects.filter(pk=recording.pk).exists()
    assert inspector.violations == []
