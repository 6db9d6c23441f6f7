"""The calls page in Chromium against a real `manage.py runrelay` (its worker, socket server
and simulated provider, on the test database): place a call from the form and watch its row
reach `completed` without a reload, pushed live over the socket; cancel another. Each state of
the page is scanned with axe-core (tests/browser.py)."""

import pytest

from calls.models import Call
from harness.live import RelayProcess
from tests.browser import NEEDS_CHROMIUM, submit
from tests.console.pages import log_in
from tests.factories import CallFactory, NumberFactory

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM, pytest.mark.timeout(300)]

DEADLINE_MS = 30_000
# Every status the page's status cells are given after it loads (by the script alone).
RECORD_STATUSES = """
window.seenStatuses = [];
new MutationObserver((changes) => {
  for (const change of changes) window.seenStatuses.push(change.target.dataset.status);
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-status"]});
"""


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    # Steps 2 s apart: a call can be seen dialing and ringing, and canceled before it ends.
    process = RelayProcess(tmp_path_factory.mktemp("relay"), SIMULATED_STEP_SECONDS="2")
    yield process
    process.stop()


def status_of(page, call: Call) -> str:
    return page.get_attribute(f'[data-call-id="{call.call_id}"] .call-status', "data-status")


def test_a_call_placed_from_the_form_is_followed_live_and_another_canceled(
    real_hashers, relay, page, inspector, user
):  # real_hashers first: the server checks the user's password with Relay's own hashers
    NumberFactory(owner=user, alias="Shop")
    page.add_init_script(RECORD_STATUSES)
    log_in(page, relay.base, user)
    page.goto(f"{relay.base}/calls")
    inspector.look(page, "calls-empty")

    page.fill("#id_to", "12")
    page.fill("#id_message", "Your table is ready")
    submit(page, "Place the call")
    assert "E.164" in page.inner_text("#id_to_errors")
    inspector.look(page, "calls-refused")
    page.fill("#id_to", "+442079460123")
    submit(page, "Place the call")
    first = Call.objects.get(owner=user)
    assert "Calling +442079460123." in page.inner_text("[role=status]")
    page.wait_for_function(
        # A function, not an expression: Playwright evals an expression, which the policy refuses.
        f"() => document.querySelector('[data-call-id=\"{first.call_id}\"] .call-status')"
        ".dataset.status === 'completed'",
        timeout=DEADLINE_MS,
    )
    seen = page.evaluate("window.seenStatuses")
    assert {"ringing", "in_progress"} & set(seen), seen  # pushed while the page was open
    assert page.inner_text(f'[data-call-id="{first.call_id}"] .call-status') == "Completed"
    CallFactory(owner=user, call_id="still/ringing", status="ringing")  # never advances
    page.reload()
    inspector.look(page, "calls")  # a call with its Cancel button, one ended without

    page.fill("#id_to", "+442079460124")
    page.fill("#id_message", "Never mind")
    submit(page, "Place the call")
    second = Call.objects.get(owner=user, to="+442079460124")
    with page.expect_navigation():
        page.click(f'[data-call-id="{second.call_id}"] button:text("Cancel")')
    assert "is canceled" in page.inner_text("[role=status]")
    assert status_of(page, second) == "canceled"
    second.refresh_from_db()
    assert second.status == "canceled"
    assert inspector.violations == []


def test_the_script_reconnects_with_a_fresh_token_until_signed_out(real_hashers, relay, page, user):
    log_in(page, relay.base, user)
    with page.expect_response(lambda r: r.url.endswith("/calls/status")):  # the socket opened
        page.goto(f"{relay.base}/calls")
    csrf = page.input_value("input[name=csrfmiddlewaretoken]")

    # Signed out elsewhere (a request of the same browser, the page left open): the server
    # closes the socket (4401); the script asks for a fresh token and is told 401.
    with page.expect_response(lambda r: r.url.endswith("/calls/socket-token")) as refused:
        page.request.post(f"{relay.base}/logout", form={"csrfmiddlewaretoken": csrf})
    assert refused.value.status == 401
