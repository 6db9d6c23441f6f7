"""A number's blocklist, forwarding, greeting, opening hours and music on hold pages in a real
browser (Playwright driving Debian's Chromium), worked as a person would, without JavaScript
of ours: each page, and each refused form, scanned with axe-core (no serious or critical
violation) and shot at desktop and phone width (tests/browser.py's Inspector)."""

import pytest

from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import log_in
from tests.factories import NumberFactory, NumberMemberFactory, music_wav
from virtual_numbers.models import BlockedCaller, Number, OpeningHours

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


@pytest.fixture
def signed_in(live_server, page, user, number):
    """The page, logged in as `user`, on their numbers (`number` among them)."""
    log_in(page, live_server.url, user)
    return page


def test_blocking_and_unblocking_a_caller(signed_in, inspector, number):
    page = signed_in
    page.click(f"a:has-text('Blocked callers of {number.number}')")
    assert "This number blocks no caller." in page.inner_text("main")
    inspector.look(page, "blocklist-empty")

    page.fill("#id_caller_num", "07700 900123")
    submit(page, "Block the caller")
    assert "Must be a phone number in E.164 form" in page.inner_text("#id_caller_num_errors")
    inspector.look(page, "blocklist-refused")

    page.fill("#id_caller_num", "+44 7700 900123")
    submit(page, "Block the caller")
    assert "+447700900123 is blocked" in page.inner_text("[role=status]")
    page.fill("#id_caller_num", "+447700900124")
    submit(page, "Block the caller")
    inspector.look(page, "blocklist")

    submit(page, "Unblock +447700900123")
    assert "+447700900123 is unblocked" in page.inner_text("[role=status]")
    assert list(BlockedCaller.objects.values_list("caller_num", flat=True)) == ["+447700900124"]
    assert inspector.violations == []


def test_setting_refusing_and_stopping_forwarding(signed_in, inspector, number):
    page = signed_in
    page.click(f"a:has-text('Forwarding of {number.number}')")
    assert "Forwarding is off" in page.inner_text("main")
    inspector.look(page, "forwarding-off")

    page.fill("#id_targets", "+447400123456\nmy mobile")
    page.fill("#id_ringSeconds", "90")
    submit(page, "Save the forwarding")
    refused = page.inner_text("#id_targets_errors")
    assert "my mobile: Must be a phone number in E.164 form" in refused
    assert "less than or equal to 60" in page.inner_text("#id_ringSeconds_errors")
    inspector.look(page, "forwarding-refused")

    page.fill("#id_targets", "+447400123456\n\n+447400123457")
    page.fill("#id_ringSeconds", "25")
    page.check("#id_screening")
    page.select_option("#id_callerId", "number")
    submit(page, "Save the forwarding")
    assert "for 25 seconds, screened" in page.inner_text(".current")
    inspector.look(page, "forwarding")
    number.refresh_from_db()
    assert number.forward_targets == ["+447400123456", "+447400123457"]

    submit(page, "Stop forwarding")
    assert "Forwarding is off" in page.inner_text(".current")
    assert Number.objects.get(pk=number.pk).forward_targets == []
    assert inspector.violations == []


def test_setting_a_greeting(signed_in, inspector, number):
    page = signed_in
    page.click(f"a:has-text('Greeting of {number.number}')")
    inspector.look(page, "greeting")

    page.fill("#id_greeting", "x" * 501)
    submit(page, "Save the greeting")
    assert "at most 500 characters" in page.inner_text("#id_greeting_errors")
    inspector.look(page, "greeting-refused")

    page.fill("#id_greeting", "You have reached the shop.")
    submit(page, "Save the greeting")
    assert "hear your greeting" in page.inner_text("[role=status]")
    assert Number.objects.get(pk=number.pk).greeting == "You have reached the shop."
    assert inspector.violations == []


def test_setting_opening_hours_and_do_not_disturb(signed_in, inspector, number):
    page = signed_in
    page.click(f"a:has-text('Opening hours of {number.number}')")
    assert "No opening hours" in page.inner_text("main")
    inspector.look(page, "hours-none")

    page.fill("#id_timeZone", "Europe/London")
    page.fill("#id_weekly", "mon-fri 09:00-17:30\nfri 17:00-18:00")
    submit(page, "Save the opening hours")
    assert "Overlaps window 0" in page.inner_text("#id_weekly_errors")
    inspector.look(page, "hours-refused")

    page.fill("#id_weekly", "mon-fri 09:00-17:30")
    page.check("#id_doNotDisturb")
    submit(page, "Save the opening hours")
    assert "Do not disturb is on" in page.inner_text("[role=status]")
    hours = OpeningHours.objects.get(number=number)
    assert (hours.do_not_disturb, len(hours.weekly)) == (True, 1)
    inspector.look(page, "hours")
    assert inspector.violations == []


def test_the_forwarding_form_is_worked_by_keyboard_with_a_visible_focus(signed_in, number):
    page = signed_in
    page.goto(f"{page.url.rsplit('/', 1)[0]}/numbers/{number.pk}/forwarding")
    page.focus("#id_targets")
    reached = []
    for _ in range(4):
        page.keyboard.press("Tab")
        reached.append(
            page.evaluate(
                "() => [document.activeElement.id || document.activeElement.textContent.trim(),"
                " getComputedStyle(document.activeElement).outlineStyle]"
            )
        )

    assert [name for name, _ in reached][:3] == ["id_ringSeconds", "id_screening", "id_callerId"]
    assert reached[3][0].startswith("Save the forwarding")
    assert all(outline != "none" for _, outline in reached)


def test_building_ordering_and_refusing_a_ring_list(signed_in, inspector, user, number):
    page = signed_in
    member = NumberMemberFactory(number=number)
    page.click(f"a:has-text('Ring list of {number.number}')")
    assert "The list is empty: calls go to voicemail." in page.inner_text("main")
    inspector.look(page, "ringing-empty")

    page.fill("#id_target", "sip:desk@127.0.0.1")
    submit(page, "Add to the end of the list")
    assert "private or local address" in page.inner_text("#id_target_errors")
    inspector.look(page, "ringing-refused")

    for typed, seconds in (("+447400123456", "30"), (member.email, ""), (user.email, "15")):
        page.fill("#id_target", typed)
        page.fill("#id_ringSeconds", seconds)
        submit(page, "Add to the end of the list")
        assert "has a new last entry" in page.inner_text("[role=status]")
    inspector.look(page, "ringing")

    # Each row's buttons say which entry they move: the owner's (third) goes first.
    page.get_by_role("button", name=f"Move up entry 3, {user.email} (tabs and ring phone)").click()
    page.get_by_role("button", name=f"Move up entry 2, {user.email} (tabs and ring phone)").click()
    page.get_by_role(
        "button", name="Remove entry 3, " + f"{member.email} (tabs and ring phone)"
    ).click()
    page.check("#strategy-in_order")
    submit(page, "Save how the list rings")
    assert "How the list rings is saved." in page.inner_text("[role=status]")
    number.refresh_from_db()
    assert number.ring_entries == [
        {"member": str(user.pk), "ringSeconds": 15},
        {"phone": "+447400123456", "ringSeconds": 30},
    ]
    assert number.ring_strategy == "in_order"
    inspector.look(page, "ringing-ordered")
    assert inspector.violations == []


def test_uploading_refusing_and_removing_music_on_hold(signed_in, inspector, number):
    page = signed_in
    page.click(f"a:has-text('Music on hold of {number.number}')")
    assert "Held callers hear Relay's own music." in page.inner_text(".current")
    inspector.look(page, "hold-music-none")

    # The browser sends the file as it is, multipart: a text file is refused on the page.
    page.set_input_files(
        "#hold-music-file", {"name": "notes.wav", "mimeType": "audio/wav", "buffer": b"hello"}
    )
    submit(page, "Upload the music")
    assert "Not a WAV file (RIFF/WAVE)." in page.inner_text("[role=alert]")
    inspector.look(page, "hold-music-refused")

    page.set_input_files(
        "#hold-music-file",
        {"name": "music.wav", "mimeType": "audio/wav", "buffer": music_wav(1.5)},
    )
    submit(page, "Upload the music")
    assert "hear your music" in page.inner_text("[role=status]")
    assert "the music you uploaded (1.5 s)" in page.inner_text(".current")
    assert page.get_by_label(f"Music on hold of {number.number}").is_visible()
    inspector.look(page, "hold-music")

    submit(page, "Remove the music on hold")
    assert "hear Relay's own music again" in page.inner_text("[role=status]")
    assert Number.objects.get(pk=number.pk).hold_music == ""
    assert inspector.violations == []
