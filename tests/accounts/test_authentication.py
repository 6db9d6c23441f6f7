import base64
import json
import time
import uuid

import jwt as pyjwt
import pytest
from django.conf import settings
from rest_framework.test import APIRequestFactory

from accounts import services
from accounts.authentication import ApiKeyAuthentication, SessionJWTAuthentication
from accounts.models import LoginSession, User
from tests.conftest import api_key_client, jwt_client
from tests.factories import UserFactory

# Every authenticated endpoint of the accounts API, with a body that succeeds.
ENDPOINTS = [
    ("get", "/api/user/me", None),
    ("put", "/api/user/matrix", {"matrixId": "@alice:example.org"}),
    ("post", "/api/user/regenerate-api-key", None),
    ("get", "/api/dashboard", None),
    ("delete", "/api/user/sessions/{other_session}", None),
    ("post", "/api/auth/logout", None),
]


def call(client, method, path, body, **fmt):
    return getattr(client, method)(path.format(**fmt), body, format="json")


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def claims(login: services.AuthResult, **override) -> dict:
    now = int(time.time())
    payload = {
        "token_type": "access",
        "exp": now + 3600,
        "iat": now,
        "jti": uuid.uuid4().hex,
        "user_id": str(login.user.pk),
        "sid": str(login.session.pk),
    }
    payload.update(override)
    return {k: v for k, v in payload.items() if v is not None}


def sign(payload: dict, key: str | None = None) -> str:
    return pyjwt.encode(payload, key or settings.SIMPLE_JWT["SIGNING_KEY"], algorithm="HS256")


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_every_authenticated_endpoint_accepts_a_bearer_jwt(login, method, path, body):
    other = services.session_open(user=login.user)

    response = call(jwt_client(login.token), method, path, body, other_session=other.session.pk)

    assert response.status_code == 200, response.json()


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_every_authenticated_endpoint_accepts_an_api_key(user, method, path, body):
    other = services.session_open(user=user)

    response = call(
        api_key_client(user.api_key), method, path, body, other_session=other.session.pk
    )

    if path == "/api/auth/logout":
        # An API key has no login session to end: a clear 400, not a silent success.
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_request"
    else:
        assert response.status_code == 200, response.json()


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_every_authenticated_endpoint_refuses_a_request_without_credentials(
    api_client, login, method, path, body
):
    response = call(api_client, method, path, body, other_session=login.session.pk)

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_every_authenticated_endpoint_refuses_bad_credentials(login, method, path, body):
    bad_key = api_key_client("vr_" + "x" * 40)
    bad_jwt = jwt_client(login.token[:-4] + "AAAA")

    for client in (bad_key, bad_jwt):
        response = call(client, method, path, body, other_session=login.session.pk)
        assert response.status_code == 401
        assert response.json()["code"] == "authentication_failed"


@pytest.mark.django_db
def test_a_tampered_payload_is_refused(login):
    header, payload, signature = login.token.split(".")
    forged = b64(claims(login, user_id=str(UserFactory().pk)))

    response = jwt_client(f"{header}.{forged}.{signature}").get("/api/user/me")

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


@pytest.mark.django_db
def test_an_expired_token_is_refused(login):
    expired = sign(claims(login, exp=int(time.time()) - 1, iat=int(time.time()) - 3600))

    response = jwt_client(expired).get("/api/user/me")

    assert response.status_code == 401
    assert response.json() == {
        "error": "Invalid or expired token.",
        "code": "authentication_failed",
    }


@pytest.mark.django_db
def test_an_unsigned_alg_none_token_is_refused(login):
    unsigned = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims(login))}."

    response = jwt_client(unsigned).get("/api/user/me")

    assert response.status_code == 401


@pytest.mark.django_db
def test_a_token_signed_with_another_secret_is_refused(login):
    response = jwt_client(sign(claims(login), key="some-other-secret-key-that-is-long-enough")).get(
        "/api/user/me"
    )

    assert response.status_code == 401


@pytest.mark.django_db
def test_a_correctly_signed_token_without_a_session_is_refused(login):
    response = jwt_client(sign(claims(login, sid=None))).get("/api/user/me")

    assert response.status_code == 401


@pytest.mark.django_db
# A fixed uuid that names no session: every xdist worker must collect the same test ids.
@pytest.mark.parametrize("sid", ["not-a-uuid", "5f9ae9ec-f966-4505-a619-f4215785362d"])
def test_a_token_naming_an_unknown_session_is_refused(login, sid):
    response = jwt_client(sign(claims(login, sid=sid))).get("/api/user/me")

    assert response.status_code == 401


@pytest.mark.django_db
def test_a_token_pairing_one_users_id_with_anothers_session_is_refused(login, other_user):
    theirs = services.session_open(user=other_user)

    response = jwt_client(sign(claims(login, sid=str(theirs.session.pk)))).get("/api/user/me")

    assert response.status_code == 401


@pytest.mark.django_db
def test_a_refresh_type_token_is_refused(login):
    response = jwt_client(sign(claims(login, token_type="refresh"))).get("/api/user/me")

    assert response.status_code == 401


@pytest.mark.django_db
def test_a_revoked_sessions_token_is_refused(login):
    services.session_end(session=login.session)

    response = jwt_client(login.token).get("/api/user/me")

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


@pytest.mark.django_db
def test_a_deactivated_users_token_and_key_are_refused(login):
    key = login.user.api_key
    login.user.is_active = False
    login.user.save(update_fields=["is_active"])

    assert jwt_client(login.token).get("/api/user/me").status_code == 401
    assert api_key_client(key).get("/api/user/me").status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "nonsense", "vr_", "vr_" + "a" * 40, "vr_" + "a" * 500])
def test_unknown_or_malformed_api_keys_are_refused(key):
    response = api_key_client(key).get("/api/user/me")

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


@pytest.mark.django_db
def test_a_token_that_just_worked_is_refused_on_the_request_after_logout(login):
    # Authentication reads the session afresh on every request (no cache outlives a logout).
    client = jwt_client(login.token)
    assert client.get("/api/user/me").status_code == 200

    assert client.post("/api/auth/logout").status_code == 200

    response = client.get("/api/user/me")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


@pytest.mark.django_db
def test_a_token_and_key_that_just_worked_are_refused_once_the_user_is_deactivated(login):
    key = login.user.api_key
    assert jwt_client(login.token).get("/api/user/me").status_code == 200
    assert api_key_client(key).get("/api/user/me").status_code == 200

    User.objects.filter(pk=login.user.pk).update(is_active=False)

    assert jwt_client(login.token).get("/api/user/me").status_code == 401
    assert api_key_client(key).get("/api/user/me").status_code == 401


@pytest.mark.django_db
def test_the_authenticated_user_and_session_are_the_stored_rows(login):
    # request.user and request.auth are whole model instances, as the ORM would load them.
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {login.token}")

    user, session = SessionJWTAuthentication().authenticate(request)

    assert isinstance(user, User) and isinstance(session, LoginSession)
    assert session == login.session and session.user is user
    for field in User._meta.concrete_fields:
        assert getattr(user, field.attname) == getattr(login.user, field.attname), field.name
    assert (session.active, session.created_at) == (True, login.session.created_at)
    assert not user._state.adding and user._state.db == "default"
    assert ApiKeyAuthentication().authenticate(
        APIRequestFactory().get("/", HTTP_X_API_KEY=login.user.api_key)
    ) == (user, None)
