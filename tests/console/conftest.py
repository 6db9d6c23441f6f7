import pytest
from django.test import Client

from accounts.models import LoginSession
from console.signin import SESSION_KEY
from tests.factories import DEFAULT_PASSWORD


def sign_in(client: Client, user) -> LoginSession:
    """Log `user` in through the console's login form; their new LoginSession."""
    response = client.post("/login", {"email": user.email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302, response.content
    return LoginSession.objects.get(pk=client.session[SESSION_KEY])


@pytest.fixture
def browser_client(user) -> Client:
    """Django's test client signed in to the console as `user`."""
    client = Client()
    client.login_session = sign_in(client, user)
    return client
