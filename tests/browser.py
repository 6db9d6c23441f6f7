"""What the admin's and the console's browser tests check in the pages Chromium shows them
(harness/browser.py launches it): the Content-Security-Policy held, accessibility, and the
browser phone's calls."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.browser import CHROMIUM

NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="Chromium is not installed (apt-get install chromium); CI always installs it",
)


# Run in every document before its own scripts: each `securitypolicyviolation` event the
# document fires (a blocked inline script, eval, style attribute, fetch elsewhere...) is passed
# to Python, and the promise of its delivery kept so a check can wait until all have arrived.
RECORD_POLICY_VIOLATIONS = """(() => {
    const delivered = [];
    Object.defineProperty(window, "__relayPolicyDeliveries", { value: delivered });
    document.addEventListener("securitypolicyviolation", (event) => {
        delivered.push(window.__relayPolicyViolation({
            directive: event.effectiveDirective,
            blocked: event.blockedURI,
            source: event.sourceFile,
            line: event.lineNumber,
            sample: event.sample,
        }));
    }, true);
})();"""

# Resolves once every violation reported so far has reached Python. The event is dispatched
# in a task of its own after the violation: a turn of the page's event loop lets one that is
# already queued be dispatched first.
POLICY_REPORTS_DELIVERED = """() => new Promise((turned) => setTimeout(turned, 0))
    .then(() => Promise.all(window.__relayPolicyDeliveries || []))"""


class PolicyViolations:
    """The Content-Security-Policy violations every page of a browser `context` reports."""

    def __init__(self, context):
        self.reports: list[str] = []
        context.expose_binding("__relayPolicyViolation", self._record)
        context.add_init_script(RECORD_POLICY_VIOLATIONS)
        self.context = context

    def _record(self, source, violation: dict) -> None:
        self.reports.append(
            f"{source['frame'].url}: {violation['directive']} blocked "
            f"{violation['blocked'] or '(nothing named)'} at "
            f"{violation['source'] or '(the page)'}:{violation['line']} {violation['sample']!r}"
        )

    def delivered(self) -> list[str]:
        """The reports, once each open page has delivered every one it has fired."""
        for page in self.context.pages:
            if not page.is_closed():
                page.evaluate(POLICY_REPORTS_DELIVERED)
        return self.reports


@contextmanager
def opened_page(browser, *, width: int, height: int) -> Iterator:
    """A page in a context of its own, `width` x `height`, each action given 15 s. The test
    fails if any page of the context reported a Content-Security-Policy violation: every
    browser test runs under the policy the site sends (docs/console.md)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        violations = PolicyViolations(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        reports = violations.delivered()
        assert reports == [], "the page broke its Content-Security-Policy:\n" + "\n".join(reports)
    finally:
        context.close()


WIDTHS = {"desktop": 1280, "phone": 390}
BLOCKING_IMPACTS = {"serious", "critical"}


class Inspector:
    """Shoots each page at every width into `artifacts` and keeps the serious and critical
    accessibility violations axe-core finds there."""

    def __init__(self, artifacts: Path):
        from axe_playwright_python.sync_playwright import Axe

        self.axe, self.artifacts, self.violations = Axe(), artifacts, []
        artifacts.mkdir(parents=True, exist_ok=True)

    def look(self, page, name: str) -> None:
        for label, width in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(self.artifacts / f"{name}-{label}.png"), full_page=True)
            for violation in self.axe.run(page).response["violations"]:
                if violation["impact"] in BLOCKING_IMPACTS:
                    self.violations.append(
                        f"{name} ({label}): {violation['id']}: {violation['help']}"
                    )
        page.set_viewport_size({"width": WIDTHS["desktop"], "height": 900})


def artifacts_dir(tmp_path: Path, name: str) -> Path:
    """$TEST_ARTIFACTS_DIR/<name> when that is set, else the test's temporary directory: a test
    run leaves the checkout as it found it."""
    root = os.environ.get("TEST_ARTIFACTS_DIR")
    return Path(root) / name if root else tmp_path / name


def submit(page, button: str) -> None:
    """Click the button labelled `button` and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(f"button:text('{button}')")


# --- the browser phone's pages (issue 43): observed, never steered from inside -----------
# Each RTCPeerConnection a page makes is kept in window.__peers, so that a test can read what
# the page's call received and sent (getStats).
KEEP_PEER_CONNECTIONS = """
window.__peers = [];
const Native = window.RTCPeerConnection;
window.RTCPeerConnection = function (config) {
  const pc = new Native(config);
  window.__peers.push(pc);
  return pc;
};
window.RTCPeerConnection.prototype = Native.prototype;
"""


def rtp_stat(kind: str, field: str) -> str:
    """A page function: the sum of `field` over the audio stats of `kind` (inbound-rtp,
    outbound-rtp) of the page's last peer connection (0 before there is one). It is async:
    poll it with page.evaluate, never page.wait_for_function, which takes its promise for a
    truthy answer at once."""
    return f"""async () => {{
  const pc = window.__peers[window.__peers.length - 1];
  if (!pc) return 0;
  let sum = 0;
  (await pc.getStats()).forEach((s) => {{
    if (s.type === "{kind}" && s.kind === "audio") sum += s.{field} || 0;
  }});
  return sum;
}}"""
