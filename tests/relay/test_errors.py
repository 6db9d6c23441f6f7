import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/nowhere", "/api/nowhere", "/api/user/me/", "/api/user"])
def test_unknown_paths_get_a_json_404(client, path):
    response = client.get(path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "Not found.", "code": "not_found"}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/auth/register", "/api/user/matrix"])
def test_a_wrong_method_gets_a_json_405(client_jwt, path):
    response = client_jwt.get(path)

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.django_db
def test_healthz_refuses_other_methods(client):
    assert client.post("/healthz").status_code == 405
