import pytest
from django.test import Client

from accounts.models import LoginSession
from console.signin import SESSION_KEY
from harness.browser import launched_chromium
from tests.browser import WIDTHS, Inspector, artifacts_dir, opened_page
from tests.console.pages import csrf_signed_in
from tests.factories import DEFAULT_PASSWORD


def sign_in(client: Client, user) -> LoginSession:
    """Log `user` in through the console's login form; their new LoginSession."""
    response = client.post("/login", {"email": user.email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302, response.content
    return LoginSession.objects.get(pk=client.session[SESSION_KEY])


@pytest.fixture
def csrf_client(user) -> Client:
    """`user`'s browser that checks CSRF, sending no token unless a test adds one."""
    return csrf_signed_in(user)


@pytest.fixture
def browser_client(user) -> Client:
    """Django's test client signed in to the console as `user`."""
    client = Client()
    client.login_session = sign_in(client, user)
    return client


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for a module's browser tests."""
    with launched_chromium() as browser:
        yield browser


@pytest.fixture
def page(browser):
    with opened_page(browser, width=WIDTHS["desktop"], height=900) as page:
        yield page


@pytest.fixture
def inspector(tmp_path) -> Inspector:
    """Screenshots of each page looked at go to $TEST_ARTIFACTS_DIR/console/."""
    return Inspector(artifacts_dir(tmp_path, "console"))
