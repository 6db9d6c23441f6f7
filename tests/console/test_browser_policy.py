"""The browser tests' guard on the Content-Security-Policy (tests/browser.py): a page that
breaks the policy fails its test, so every other browser test proves its pages keep it."""

import pytest

from tests.browser import NEEDS_CHROMIUM, PolicyViolations, opened_page
from tests.console.pages import log_in

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]

# An inline script added to the page, as an injection would add one; resolves with the
# directive the browser reports it under (or "ran" if the policy let it run).
INJECT_INLINE_SCRIPT = """() => new Promise((reported) => {
    document.addEventListener("securitypolicyviolation",
        (event) => reported(event.effectiveDirective), { once: true });
    const script = document.createElement("script");
    script.textContent = "window.injected = true";
    document.body.append(script);
    if (window.injected) reported("ran");
})"""


def test_an_injected_inline_script_is_refused_and_reported(live_server, browser, user):
    context = browser.new_context()
    try:
        violations = PolicyViolations(context)
        page = context.new_page()
        log_in(page, live_server.url, user, then="/account")
        assert violations.delivered() == []  # the account page keeps the policy itself

        assert page.evaluate(INJECT_INLINE_SCRIPT) == "script-src-elem"
        assert page.evaluate("() => window.injected") is None
        [report] = violations.delivered()
        assert report.startswith(f"{live_server.url}/account: script-src-elem blocked inline")
    finally:
        context.close()


def test_a_page_that_breaks_the_policy_fails_its_browser_test(live_server, browser, user):
    broken = r"broke its Content-Security-Policy:\n\S+/calls: style-src-attr blocked inline"
    with (
        pytest.raises(AssertionError, match=broken),
        opened_page(browser, width=1280, height=900) as page,
    ):
        log_in(page, live_server.url, user, then="/calls")
        # A style attribute written through the parser, as markup an injection wrote would be.
        page.evaluate("""() => { document.body.insertAdjacentHTML(
            "beforeend", '<p style="color: red">styled</p>'); }""")
