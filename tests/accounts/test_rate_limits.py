import time

import pytest

from tests.factories import DEFAULT_PASSWORD


@pytest.fixture
def tight_limits(settings):
    settings.RATE_LIMIT_AUTH_PER_IP = "3/m"
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "1000/m"
    return settings


def login(client, email, password="wrong-password-1", **extra):
    return client.post(
        "/api/auth/login", {"email": email, "password": password}, format="json", **extra
    )


@pytest.mark.django_db
def test_login_is_limited_per_client_ip(api_client, user, tight_limits):
    for i in range(3):
        assert login(api_client, f"x{i}@example.com").status_code == 401

    response = login(api_client, user.email, DEFAULT_PASSWORD)

    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 61
    assert response.headers["X-RateLimit-Limit"] == "3"
    assert response.headers["X-RateLimit-Remaining"] == "0"
    reset_in = int(response.headers["X-RateLimit-Reset"]) - time.time()
    assert -1 <= reset_in <= 62


@pytest.mark.django_db
def test_another_ip_is_counted_separately(api_client, user, tight_limits):
    for i in range(4):
        login(api_client, f"x{i}@example.com", REMOTE_ADDR="10.0.0.1")

    assert (
        login(api_client, user.email, DEFAULT_PASSWORD, REMOTE_ADDR="10.0.0.2").status_code == 200
    )


@pytest.mark.django_db
def test_login_is_limited_per_email_across_ips(api_client, user, settings):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "2/m"
    login(api_client, user.email, REMOTE_ADDR="10.0.0.1")
    login(api_client, user.email.upper(), REMOTE_ADDR="10.0.0.2")

    response = login(api_client, user.email, DEFAULT_PASSWORD, REMOTE_ADDR="10.0.0.3")

    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"


@pytest.mark.django_db
def test_register_is_limited_per_client_ip(api_client, tight_limits):
    for i in range(3):
        api_client.post(
            "/api/auth/register", {"email": f"r{i}@example.com", "password": "x"}, format="json"
        )

    response = api_client.post(
        "/api/auth/register",
        {"email": "new@example.com", "password": "a-long-and-unusual-passphrase"},
        format="json",
    )

    assert response.status_code == 429
    assert "Retry-After" in response.headers


@pytest.mark.django_db
def test_a_forged_forwarded_for_does_not_escape_the_limit_without_proxies(api_client, tight_limits):
    for i in range(3):
        login(api_client, f"x{i}@example.com", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}")

    response = login(api_client, "y@example.com", HTTP_X_FORWARDED_FOR="203.0.113.99")

    assert response.status_code == 429


@pytest.mark.django_db
def test_behind_one_proxy_only_the_address_the_proxy_saw_counts(api_client, tight_limits):
    tight_limits.TRUSTED_PROXY_COUNT = 1
    # The proxy appends the real client (198.51.100.7); whatever the client wrote before it
    # is ignored.
    for i in range(3):
        login(api_client, f"x{i}@example.com", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}, 198.51.100.7")

    blocked = login(api_client, "y@example.com", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7")
    other_client = login(api_client, "z@example.com", HTTP_X_FORWARDED_FOR="198.51.100.8")

    assert blocked.status_code == 429
    assert other_client.status_code == 401
