"""Debian's Chromium under Playwright, as the admin's and the console's browser tests drive it."""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="Chromium is not installed (apt-get install chromium); CI always installs it",
)


@contextmanager
def launched_chromium() -> Iterator:
    """A headless Chromium with nothing of its own reaching out (updates, sync, QUIC)."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # between page actions are still plain synchronous code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                ],
            )
            try:
                yield browser
            finally:
                browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@contextmanager
def opened_page(browser, *, width: int, height: int) -> Iterator:
    """A page in a context of its own, `width` x `height`, each action given 15 s."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
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
