from datetime import timedelta

import pytest
from django.utils import timezone

from accounts import services
from accounts.models import LoginSession
from tests.conftest import jwt_client


@pytest.mark.django_db
def test_logout_ends_the_current_session_only(user, login):
    other = services.session_open(user=user)

    response = jwt_client(login.token).post("/api/auth/logout")

    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert jwt_client(login.token).get("/api/user/me").status_code == 401
    assert jwt_client(other.token).get("/api/user/me").status_code == 200
    login.session.refresh_from_db()
    assert login.session.active is False
    assert login.session.ended_at is not None


@pytest.mark.django_db
def test_logging_out_twice_is_refused_the_second_time(login):
    jwt_client(login.token).post("/api/auth/logout")

    response = jwt_client(login.token).post("/api/auth/logout")

    assert response.status_code == 401


@pytest.mark.django_db
def test_ending_another_of_my_sessions_revokes_its_token(user, login):
    other = services.session_open(user=user)

    response = jwt_client(login.token).delete(f"/api/user/sessions/{other.session.pk}")

    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert jwt_client(other.token).get("/api/user/me").status_code == 401
    assert jwt_client(login.token).get("/api/user/me").status_code == 200


@pytest.mark.django_db
def test_another_users_session_is_not_found_and_stays_active(login, other_user):
    theirs = services.session_open(user=other_user)

    response = jwt_client(login.token).delete(f"/api/user/sessions/{theirs.session.pk}")

    assert response.status_code == 404
    assert response.json() == {"error": "Not found.", "code": "not_found"}
    theirs.session.refresh_from_db()
    assert theirs.session.active is True
    assert jwt_client(theirs.token).get("/api/user/me").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("session_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_session_id_is_not_found(client_jwt, session_id):
    response = client_jwt.delete(f"/api/user/sessions/{session_id}")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.django_db
def test_last_seen_moves_at_most_once_a_minute(login):
    long_ago = timezone.now() - timedelta(minutes=5)
    LoginSession.objects.filter(pk=login.session.pk).update(last_seen=long_ago)
    client = jwt_client(login.token)

    client.get("/api/user/me")
    login.session.refresh_from_db()
    first = login.session.last_seen
    assert first > long_ago

    client.get("/api/user/me")
    login.session.refresh_from_db()
    assert login.session.last_seen == first


@pytest.mark.django_db
def test_last_seen_is_not_written_on_every_request(login, django_assert_num_queries):
    client = jwt_client(login.token)
    client.get("/api/user/me")  # a fresh session was seen just now

    # The session, its user, the quotas' use and whether a second factor is on: one read.
    with django_assert_num_queries(1) as queries:
        client.get("/api/user/me")

    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]


@pytest.mark.django_db
def test_sessions_end_all_ends_every_active_session(user):
    tokens = [services.session_open(user=user).token for _ in range(3)]

    assert services.sessions_end_all(user=user) == 3

    assert all(jwt_client(t).get("/api/user/me").status_code == 401 for t in tokens)
