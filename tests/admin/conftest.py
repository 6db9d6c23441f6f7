import pytest

from tests.browser import launched_chromium, opened_page


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for a module's browser tests of the admin."""
    with launched_chromium() as browser:
        yield browser


@pytest.fixture
def page(browser):
    with opened_page(browser, width=1400, height=1000) as page:
        yield page
