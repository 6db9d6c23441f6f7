"""POST /api/user/password: the current password, then the new one under the API's rules;
every other session ends (JWTs refused at once, sockets closed 4401), the API key stays, and
a mail tells the owner."""

import logging

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache

from accounts import services
from accounts.models import LoginSession
from tests.conftest import api_key_client, jwt_client
from tests.factories import DEFAULT_PASSWORD

NEW_PASSWORD = "a-brand-new-passphrase"
CLOSED_4401 = {"type": "websocket.close", "code": 4401}


def change(client, current=DEFAULT_PASSWORD, new=NEW_PASSWORD):
    return client.post(
        "/api/user/password",
        {"currentPassword": current, "newPassword": new},
        format="json",
    )


@pytest.mark.django_db
def test_the_password_changes_and_every_other_session_ends(user, login, mailbox):
    other = services.session_open(user=user)
    api_key = user.api_key

    response = change(jwt_client(login.token))

    assert response.status_code == 204
    assert response.content == b""
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD) and not user.check_password(DEFAULT_PASSWORD)
    assert jwt_client(other.token).get("/api/user/me").status_code == 401
    assert jwt_client(login.token).get("/api/user/me").status_code == 200
    assert api_key_client(api_key).get("/api/user/me").status_code == 200
    assert user.api_key == api_key
    assert list(LoginSession.objects.filter(user=user, active=True)) == [login.session]
    new_login = jwt_client("").post(
        "/api/auth/login", {"email": user.email, "password": NEW_PASSWORD}, format="json"
    )
    assert new_login.status_code == 200

    notice = mailbox.only(user.email)
    assert notice.message["Subject"] == "Your Relay password was changed"
    assert user.email in notice.text and user.email in notice.html
    assert notice.links() == ["http://testserver/password-reset"]


@pytest.mark.django_db
def test_with_an_api_key_every_session_ends(user, login, mailbox):
    response = change(api_key_client(user.api_key))

    assert response.status_code == 204
    assert jwt_client(login.token).get("/api/user/me").status_code == 401
    assert not LoginSession.objects.filter(user=user, active=True).exists()


@pytest.mark.django_db
def test_a_wrong_current_password_is_refused_and_changes_nothing(user, login, mailbox):
    other = services.session_open(user=user)

    response = change(jwt_client(login.token), current="not-my-password")

    assert response.status_code == 403
    assert response.json() == {
        "error": "The current password is wrong.",
        "code": "password_mismatch",
    }
    user.refresh_from_db()
    assert user.check_password(DEFAULT_PASSWORD)
    assert jwt_client(other.token).get("/api/user/me").status_code == 200
    assert mailbox.delivered() == []


@pytest.mark.django_db
def test_wrong_current_passwords_count_toward_the_login_rate_limit(user, login, settings):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "3/m"
    cache.clear()
    client = jwt_client(login.token)
    statuses = [change(client, current=f"guess-{n}").status_code for n in range(3)]
    assert statuses == [403, 403, 403]

    blocked = change(client)  # even the right password now waits
    assert blocked.status_code == 429
    assert blocked.json()["code"] == "rate_limited"
    assert int(blocked["Retry-After"]) > 0
    login_attempt = jwt_client("").post(
        "/api/auth/login", {"email": user.email, "password": DEFAULT_PASSWORD}, format="json"
    )
    assert login_attempt.status_code == 429  # the same budget as logins


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("new", "problem"),
    [
        ("short", "too short"),
        ("12345678901", "entirely numeric"),
        ("password123", "too common"),
    ],
)
def test_the_new_password_follows_the_password_rules(login, new, problem, mailbox):
    response = change(jwt_client(login.token), new=new)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert problem in " ".join(body["fields"]["newPassword"])
    assert mailbox.delivered() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"currentPassword": DEFAULT_PASSWORD},
        {"currentPassword": 12345678, "newPassword": NEW_PASSWORD},
        {"currentPassword": DEFAULT_PASSWORD, "newPassword": "nul\x00-in-the-middle"},
        {"currentPassword": DEFAULT_PASSWORD, "newPassword": "x" * 100_000},
        {"currentPassword": ["a"], "newPassword": {"b": 1}},
    ],
)
def test_bad_input_is_a_400_that_changes_nothing(user, login, body):
    response = jwt_client(login.token).post("/api/user/password", body, format="json")

    assert response.status_code in (400, 413)
    assert response.json()["code"] in ("invalid_request", "payload_too_large")
    user.refresh_from_db()
    assert user.check_password(DEFAULT_PASSWORD)


@pytest.mark.django_db
@pytest.mark.django_db
def test_a_lone_surrogate_is_a_400(user, login):
    # JSON may escape a lone surrogate (RFC 8259 §8.2); no client library would send one.
    raw = f'{{"currentPassword": "{DEFAULT_PASSWORD}", "newPassword": "lone-\\ud800-x"}}'
    response = jwt_client(login.token).generic(
        "POST", "/api/user/password", raw, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    user.refresh_from_db()
    assert user.check_password(DEFAULT_PASSWORD)


@pytest.mark.django_db
def test_without_credentials_it_is_a_401(api_client):
    response = change(api_client)
    assert response.status_code == 401


@pytest.mark.django_db
def test_no_password_reaches_a_log(login, caplog, mailbox):
    with caplog.at_level(logging.DEBUG):
        change(jwt_client(login.token))
        change(jwt_client(login.token), current="wrong-guess-xyz")
    assert NEW_PASSWORD not in caplog.text
    assert DEFAULT_PASSWORD not in caplog.text
    assert "wrong-guess-xyz" not in caplog.text


@pytest.mark.django_db(transaction=True)
async def test_the_other_sessions_sockets_close_with_4401(communicator, user):
    mine = await sync_to_async(services.session_open)(user=user)
    socket, connected = await communicator(user)  # another session of the same user
    assert connected

    response = await sync_to_async(change)(jwt_client(mine.token))

    assert response.status_code == 204
    assert await socket.receive_output(timeout=5) == CLOSED_4401
