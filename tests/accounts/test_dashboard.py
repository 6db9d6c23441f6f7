from datetime import timedelta

import pytest
from django.utils import timezone

from accounts import services
from accounts.authentication import session_for_token
from tests.conftest import api_key_client, jwt_client
from tests.factories import LoginSessionFactory
from tests.interface import DASHBOARD_FIELDS


@pytest.mark.django_db
def test_dashboard_has_exact_fields_and_a_ws_url_with_the_callers_token(user, login):
    response = jwt_client(login.token).get("/api/dashboard")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == DASHBOARD_FIELDS
    assert body["email"] == user.email
    assert body["plan"] == "free"
    assert body["matrixId"] is None
    assert body["apiKey"] == user.api_key
    assert body["wsUrl"] == f"ws://testserver/ws?token={login.token}"
    assert body["sessions"] == [
        {
            "id": str(login.session.pk),
            "created_at": int(login.session.created_at.timestamp() * 1000),
            "last_seen": int(login.session.last_seen.timestamp() * 1000),
            "active": 1,
        }
    ]


@pytest.mark.django_db
def test_ws_url_uses_public_ws_url_when_set(login, settings):
    settings.PUBLIC_WS_URL = "wss://relay.example.com/"

    body = jwt_client(login.token).get("/api/dashboard").json()

    assert body["wsUrl"] == f"wss://relay.example.com/ws?token={login.token}"


@pytest.mark.django_db
def test_ws_url_is_wss_behind_a_trusted_tls_proxy(login, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["relay.example.com"]

    body = (
        jwt_client(login.token)
        .get("/api/dashboard", HTTP_X_FORWARDED_PROTO="https", HTTP_HOST="relay.example.com")
        .json()
    )

    assert body["wsUrl"] == f"wss://relay.example.com/ws?token={login.token}"


@pytest.mark.django_db
def test_dashboard_with_an_api_key_issues_a_fresh_session_token(user):
    body = api_key_client(user.api_key).get("/api/dashboard").json()

    token = body["wsUrl"].split("?token=", 1)[1]
    session = session_for_token(token)
    assert session.user_id == user.pk
    assert session.active
    assert [s["id"] for s in body["sessions"]] == [str(session.pk)]


@pytest.mark.django_db
def test_dashboard_lists_the_twenty_newest_sessions_with_active_flags(user):
    now = timezone.now()
    sessions = [
        LoginSessionFactory(user=user, created_at=now - timedelta(minutes=i)) for i in range(25)
    ]
    services.session_end(session=sessions[1])
    current = services.session_open(user=user)

    body = jwt_client(current.token).get("/api/dashboard").json()

    listed = body["sessions"]
    assert len(listed) == 20
    assert listed[0]["id"] == str(current.session.pk)
    assert [s["id"] for s in listed[1:]] == [str(s.pk) for s in sessions[:19]]
    assert [s["active"] for s in listed[:4]] == [1, 1, 0, 1]
    assert listed == sorted(listed, key=lambda s: s["created_at"], reverse=True)


@pytest.mark.django_db
def test_dashboard_never_lists_another_users_sessions(login, other_user):
    services.session_open(user=other_user)

    body = jwt_client(login.token).get("/api/dashboard").json()

    assert [s["id"] for s in body["sessions"]] == [str(login.session.pk)]


@pytest.mark.django_db
def test_ws_url_is_the_request_host_at_ws_port_when_the_socket_server_has_its_own(login, settings):
    # runrelay: gunicorn on PORT, Daphne on WS_PORT, both reached by the same host name.
    settings.WS_PORT = 8001
    settings.ALLOWED_HOSTS = ["relay.example.com", "[::1]"]

    for host, base in [
        ("relay.example.com:8000", "ws://relay.example.com:8001"),
        ("[::1]:8000", "ws://[::1]:8001"),
    ]:
        body = jwt_client(login.token).get("/api/dashboard", HTTP_HOST=host).json()
        assert body["wsUrl"] == f"{base}/ws?token={login.token}"
