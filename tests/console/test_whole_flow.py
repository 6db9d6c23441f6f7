"""Issue 31's whole flow as a new user, in Chromium against a real `manage.py runrelay` (its
gunicorn, Daphne, worker and simulated provider, on the test database): register, take a
number through the CAPTCHA, name it, place a call and watch it reach its final state live,
read the history and play a voicemail, regenerate the API key, end another session, log out.
Every page on the way is scanned with axe-core and shot at desktop and phone width; the
README shows two of those shots (docs/img/)."""

import json

import pytest
from django.conf import settings

from accounts.models import User
from calls.models import Call
from harness.live import RelayProcess, http
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import PLAYABLE, answer_the_captcha, off_the_loop
from tests.factories import voicemail_on
from tests.records import refreshed
from virtual_numbers.models import Number

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM, pytest.mark.timeout(300)]

EMAIL, PASSWORD = "whole-flow@example.com", "a-long-passphrase"
DEADLINE_MS = 30_000


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    # Steps half a second apart, so the page has states to be pushed; its voicemail files are
    # where this test writes them.
    recordings = json.dumps(settings.STORAGES["recordings"]["OPTIONS"])
    process = RelayProcess(
        tmp_path_factory.mktemp("relay"),
        SIMULATED_STEP_SECONDS="0.5",
        RECORDING_STORAGE_OPTIONS=recordings,
    )
    yield process
    process.stop()


def register_and_take_a_number(page, base: str, inspector) -> Number:
    page.goto(f"{base}/register")
    page.fill("#id_email", EMAIL)
    page.fill("#id_password", PASSWORD)
    submit(page, "Create the account")
    page.click("a:text('Take a number')")
    page.fill("#id_alias", "Office")
    page.fill("#id_pin", "4821")
    answer_the_captcha(page)
    submit(page, "Take the number")
    page.click("a:text('Rename')")
    page.fill("#id_alias", "Shop")
    submit(page, "Save the alias")
    inspector.look(page, "flow-numbers")
    return Number.objects.get(owner__email=EMAIL, alias="Shop")


def place_a_call_and_watch_it_end(page, inspector) -> Call:
    page.click("nav a:text('Calls')")
    page.fill("#id_to", "+442079460123")
    page.fill("#id_message", "Your table is ready")
    with page.expect_response(lambda r: r.url.endswith("/calls/status")):  # the socket is open
        submit(page, "Place the call")
    call = Call.objects.get(owner__email=EMAIL)
    status = f'[data-call-id="{call.call_id}"] .call-status'
    page.wait_for_function(
        # A function, not an expression: Playwright evals an expression, which the policy refuses.
        f"() => document.querySelector('{status}').dataset.status === 'completed'",
        timeout=DEADLINE_MS,
    )
    assert page.inner_text(status) == "Completed"  # without a reload
    inspector.look(page, "flow-calls")
    return call


def hear_a_voicemail(page, number: Number, inspector) -> None:
    message = off_the_loop(voicemail_on, number=number, seconds=2.0, caller="+447700900555")
    answers = []
    page.on("response", lambda r: answers.append(r.status) if "/recording" in r.url else None)
    page.click("nav a:text('History')")
    assert "+447700900555" in page.inner_text("main")
    page.wait_for_function(PLAYABLE, arg=2.0)  # the <audio> element loaded the message
    assert 206 in answers  # Chromium asked for a byte range, through gunicorn
    submit(page, "Mark heard")
    message = refreshed(message)
    assert message.heard
    inspector.look(page, "flow-history")


def regenerate_the_key(page, base: str, inspector) -> None:
    old_key = User.objects.get(email=EMAIL).api_key
    page.click("nav a:text('Account')")
    page.click("a:text('Regenerate the API key')")
    submit(page, "Regenerate the API key")
    new_key = page.input_value("#api-key")
    assert new_key != old_key
    assert page.request.get(f"{base}/api/user/me", headers={"X-API-Key": old_key}).status == 401
    assert page.request.get(f"{base}/api/user/me", headers={"X-API-Key": new_key}).ok
    inspector.look(page, "flow-account")


def end_another_session(page, base: str) -> None:
    status, body = http("POST", f"{base}/api/auth/login", {"email": EMAIL, "password": PASSWORD})
    assert status == 200
    page.goto(f"{base}/account")  # the regenerated key's page shows only the key
    ended = page.locator("button:has-text('End')").filter(has_not_text="this browser").first
    with page.expect_navigation():
        ended.click()
    assert "The session is ended" in page.inner_text("[role=status]")
    assert http("GET", f"{base}/api/user/me", token=body["token"])[0] == 401


def test_a_new_user_works_the_whole_console(relay, page, inspector, inventory):
    number = register_and_take_a_number(page, relay.base, inspector)
    place_a_call_and_watch_it_end(page, inspector)
    hear_a_voicemail(page, number, inspector)
    regenerate_the_key(page, relay.base, inspector)
    end_another_session(page, relay.base)

    submit(page, "Log out")
    assert page.url == f"{relay.base}/login"
    assert page.goto(f"{relay.base}/account").url.startswith(f"{relay.base}/login?next=")
    assert inspector.violations == []
