import pytest

from accounts.models import LoginSession
from tests.factories import DEFAULT_PASSWORD, UserFactory


def login(api_client, **body):
    return api_client.post("/api/auth/login", body, format="json")


@pytest.mark.django_db
def test_login_returns_the_register_shape_and_opens_a_new_session(api_client, user):
    response = login(api_client, email=user.email, password=DEFAULT_PASSWORD)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"token", "user"}
    assert body["user"] == {"id": str(user.pk), "email": user.email, "apiKey": user.api_key}
    assert LoginSession.objects.filter(user=user, active=True).count() == 1
    login(api_client, email=user.email, password=DEFAULT_PASSWORD)
    assert LoginSession.objects.filter(user=user, active=True).count() == 2


@pytest.mark.django_db
def test_login_ignores_the_case_of_the_email(api_client, user):
    response = login(api_client, email=user.email.upper(), password=DEFAULT_PASSWORD)

    assert response.status_code == 200


@pytest.mark.django_db
def test_wrong_password_and_unknown_email_get_the_same_answer(api_client, user):
    wrong_password = login(api_client, email=user.email, password="not-the-password")
    unknown_email = login(api_client, email="nobody@example.com", password=DEFAULT_PASSWORD)

    assert wrong_password.status_code == unknown_email.status_code == 401
    assert (
        wrong_password.json()
        == unknown_email.json()
        == {
            "error": "Wrong e-mail or password.",
            "code": "invalid_credentials",
        }
    )
    assert not LoginSession.objects.exists()


@pytest.mark.django_db
def test_a_deactivated_user_cannot_log_in(api_client):
    user = UserFactory(is_active=False)

    response = login(api_client, email=user.email, password=DEFAULT_PASSWORD)

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_credentials"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{}, {"email": "a@example.com"}, {"password": "x"}, {"email": None, "password": "x"}]
)
def test_login_with_missing_fields_is_rejected(api_client, body):
    response = api_client.post("/api/auth/login", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


@pytest.mark.django_db
def test_login_with_a_body_that_is_not_json_is_rejected(api_client):
    response = api_client.post("/api/auth/login", "{oops", content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {
        "error": "The request body is not valid JSON.",
        "code": "invalid_request",
    }
