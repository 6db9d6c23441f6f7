import pytest

from tests.conftest import api_key_client


@pytest.mark.django_db
def test_regenerating_replaces_the_key_at_once(user, client_jwt):
    old_key = user.api_key
    assert api_key_client(old_key).get("/api/user/me").status_code == 200

    response = client_jwt.post("/api/user/regenerate-api-key")

    assert response.status_code == 200
    assert set(response.json()) == {"apiKey"}
    new_key = response.json()["apiKey"]
    assert new_key != old_key
    assert new_key.startswith("vr_") and len(new_key) == 43
    old = api_key_client(old_key).get("/api/user/me")
    assert old.status_code == 401
    assert old.json()["code"] == "authentication_failed"
    assert api_key_client(new_key).get("/api/user/me").status_code == 200
    assert client_jwt.get("/api/dashboard").json()["apiKey"] == new_key


@pytest.mark.django_db
def test_regenerating_with_the_key_itself_retires_that_key(client_key):
    new_key = client_key.post("/api/user/regenerate-api-key").json()["apiKey"]

    assert client_key.get("/api/user/me").status_code == 401
    assert api_key_client(new_key).get("/api/user/me").status_code == 200


@pytest.mark.django_db
def test_keys_are_unique_per_user(user, other_user):
    assert user.api_key != other_user.api_key
    assert api_key_client(other_user.api_key).get("/api/user/me").json()["id"] == str(other_user.pk)
