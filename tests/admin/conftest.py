# The admin's browser tests use the console's Chromium: one per module, a desktop-wide page.
from tests.console.conftest import browser, page  # noqa: F401 - fixtures
