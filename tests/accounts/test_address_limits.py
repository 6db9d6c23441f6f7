"""Issue 53, finding 2: every limiter counted per address keys the address as the account's
lookup normalises it, so a spelling of the address with spaces, a tab or capitals gets no
bucket of its own, on the API and the console alike."""

import pytest
from django.test import Client

from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

SPELLINGS = [
    " sec-a@example.com",
    "sec-a@example.com ",
    "\tsec-a@example.com",
    "SEC-A@Example.com\n",
]


@pytest.fixture
def sec_a():
    return UserFactory(email="sec-a@example.com")


@pytest.fixture
def per_address(settings):
    settings.RATE_LIMIT_AUTH_PER_IP = "1000/m"
    settings.RATE_LIMIT_AUTH_PER_EMAIL = f"{len(SPELLINGS)}/m"
    settings.RATE_LIMIT_PASSWORD_RESET_PER_IP = "1000/m"
    settings.RATE_LIMIT_PASSWORD_RESET_PER_EMAIL = f"{len(SPELLINGS)}/m"
    return settings


def test_each_spelling_of_the_address_signs_in_to_the_same_account(api_client, sec_a):
    for spelling in SPELLINGS:
        response = api_client.post(
            "/api/auth/login", {"email": spelling, "password": DEFAULT_PASSWORD}, format="json"
        )
        assert response.status_code == 200, (spelling, response.content)
        assert response.json()["user"]["id"] == str(sec_a.pk)


def test_api_login_spellings_share_one_bucket(api_client, sec_a, per_address):
    for spelling in SPELLINGS:
        wrong = api_client.post(
            "/api/auth/login", {"email": spelling, "password": "wrong-password-1"}, format="json"
        )
        assert wrong.status_code == 401, spelling

    right = api_client.post(
        "/api/auth/login",
        {"email": "\t SEC-A@example.com ", "password": DEFAULT_PASSWORD},
        format="json",
    )

    assert right.status_code == 429
    assert right.json()["code"] == "rate_limited"
    assert int(right.headers["Retry-After"]) >= 1


def test_console_login_spellings_share_the_apis_bucket(api_client, sec_a, per_address):
    for spelling in SPELLINGS[:-1]:
        api_client.post(
            "/api/auth/login", {"email": spelling, "password": "wrong-password-1"}, format="json"
        )
    Client().post("/login", {"email": SPELLINGS[-1], "password": "wrong-password-1"})

    browser = Client()
    response = browser.post("/login", {"email": " Sec-A@example.com", "password": DEFAULT_PASSWORD})

    assert response.status_code == 429
    assert browser.get("/numbers").status_code == 302  # not signed in


def test_register_spellings_share_one_bucket(api_client, per_address):
    for spelling in SPELLINGS:
        api_client.post(
            "/api/auth/register", {"email": spelling, "password": "short"}, format="json"
        )

    response = api_client.post(
        "/api/auth/register",
        {"email": "sec-a@EXAMPLE.com", "password": "a-long-and-unusual-passphrase"},
        format="json",
    )

    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"


def test_password_reset_spellings_share_one_bucket(api_client, sec_a, per_address):
    for spelling in SPELLINGS:
        ok = api_client.post("/api/auth/password-reset", {"email": spelling}, format="json")
        assert ok.status_code == 202, spelling

    api_refused = api_client.post(
        "/api/auth/password-reset", {"email": "sec-a@example.com"}, format="json"
    )
    console_refused = Client().post("/password-reset", {"email": " SEC-A@example.com\t"})

    assert api_refused.status_code == 429
    assert console_refused.status_code == 429


def test_an_address_that_is_not_a_string_is_refused_and_counted(api_client, per_address):
    for _ in range(len(SPELLINGS)):
        response = api_client.post(
            "/api/auth/login", {"email": ["sec-a@example.com"], "password": "x"}, format="json"
        )
        assert response.status_code == 400

    assert (
        api_client.post(
            "/api/auth/login", {"email": ["sec-a@example.com"], "password": "x"}, format="json"
        ).status_code
        == 429
    )
