"""Debian's Chromium under Playwright, headless, as the admin's and the console's browser tests
(tests/browser.py) and the telephony tests' browser phones drive it."""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def launched_chromium(*extra: str) -> Iterator:
    """A headless Chromium with nothing of its own reaching out (updates, sync, QUIC), and
    `extra` flags (the browser phone's fake microphone)."""
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
                    *extra,
                ],
            )
            try:
                yield browser
            finally:
                browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
