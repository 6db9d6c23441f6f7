"""Swagger UI at /api/docs, in a real browser (Playwright driving Debian's Chromium), offline:
it renders the schema, the WebSocket protocol of its description included, and the
operations with their summaries."""

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CI"),
        reason="Chromium is not installed (apt-get install chromium); CI always installs it",
    ),
]


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def test_swagger_ui_shows_the_websocket_protocol_and_the_operations(live_server, page):
    outside = []

    def note(request):
        if not request.url.startswith(live_server.url):
            outside.append(request.url)

    page.on("request", note)
    page.goto(f"{live_server.url}/api/docs")
    page.get_by_role("heading", name="WebSocket: /ws").wait_for()
    assert page.get_by_text("4401").first.is_visible()
    page.get_by_text("Cancel a call").first.wait_for()
    page.get_by_text("Unblock a caller").first.wait_for()
    assert outside == []  # offline: every asset comes from Relay itself
