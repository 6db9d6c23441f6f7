import pytest
from django.db import connection

from accounts.models import LoginSession, User
from tests.conftest import jwt_client

PASSWORD = "a-long-and-unusual-passphrase"


def register(api_client, **body):
    return api_client.post("/api/auth/register", body, format="json")


@pytest.mark.django_db
def test_register_returns_a_token_and_the_user_with_exact_fields(api_client):
    response = register(api_client, email="Alice@Example.com", password=PASSWORD)

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"token", "user"}
    assert set(body["user"]) == {"id", "email", "apiKey"}
    assert body["user"]["email"] == "alice@example.com"
    assert body["user"]["apiKey"].startswith("vr_")
    assert len(body["user"]["apiKey"]) == 43
    user = User.objects.get(pk=body["user"]["id"])
    assert user.plan == "free"
    assert LoginSession.objects.filter(user=user, active=True).count() == 1


@pytest.mark.django_db
def test_the_registration_token_authenticates(api_client):
    token = register(api_client, email="bob@example.com", password=PASSWORD).json()["token"]

    response = jwt_client(token).get("/api/user/me")

    assert response.status_code == 200
    assert response.json()["email"] == "bob@example.com"


@pytest.mark.django_db
def test_an_email_registered_in_another_case_is_a_conflict(api_client):
    assert register(api_client, email="carol@example.com", password=PASSWORD).status_code == 201

    response = register(api_client, email="CAROL@Example.COM", password=PASSWORD)

    assert response.status_code == 409
    assert response.json() == {
        "error": "This e-mail address is already registered.",
        "code": "email_taken",
    }
    assert User.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "password",
    ["short1!", "password123", "12345678901234", "dave.example@example.com"],
    ids=["too-short", "common", "all-digits", "like-the-email"],
)
def test_a_weak_password_is_rejected_with_the_password_field_named(api_client, password):
    response = register(api_client, email="dave.example@example.com", password=password)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["fields"]["password"]
    assert not User.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("email", ["not-an-email", "a@", "@example.com", "a b@example.com", ""])
def test_a_malformed_email_is_rejected(api_client, email):
    response = register(api_client, email=email, password=PASSWORD)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "email" in response.json()["fields"]
    assert not User.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({"password": PASSWORD}, {"email"}),
        ({"email": "e@example.com"}, {"password"}),
        ({}, {"email", "password"}),
    ],
)
def test_missing_fields_are_named(api_client, body, missing):
    response = api_client.post("/api/auth/register", body, format="json")

    assert response.status_code == 400
    assert set(response.json()["fields"]) == missing


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [{"email": 12345, "password": PASSWORD}, {"email": "f@example.com", "password": 123456789012}],
    ids=["email-number", "password-number"],
)
def test_wrong_typed_fields_are_rejected(api_client, body):
    response = api_client.post("/api/auth/register", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert not User.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raw", ['{"email": "g@example.com", "password":', "not json", "[]", "null", '"x"']
)
def test_a_body_that_is_not_a_json_object_is_rejected(api_client, raw):
    response = api_client.post("/api/auth/register", raw, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "error" in response.json()


@pytest.mark.django_db
def test_a_form_encoded_body_is_unsupported(api_client):
    response = api_client.post(
        "/api/auth/register", {"email": "h@example.com", "password": PASSWORD}
    )

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"


@pytest.mark.django_db
def test_the_user_row_holds_neither_the_password_nor_the_api_key_in_plain_text(
    api_client, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]
    body = register(api_client, email="ivy@example.com", password=PASSWORD).json()
    api_key = body["user"]["apiKey"]

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_user WHERE email = %s", ["ivy@example.com"])
        row = " ".join(str(value) for value in cursor.fetchone())

    assert PASSWORD not in row
    assert api_key not in row
    assert api_key[3:] not in row
    assert User.objects.get(email="ivy@example.com").password.startswith("argon2$")
