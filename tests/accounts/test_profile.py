import time
import uuid
from datetime import UTC, datetime

import pytest

from accounts import services
from tests.conftest import jwt_client
from tests.factories import UserFactory
from tests.interface import ME_FIELDS


@pytest.mark.django_db
def test_me_returns_the_profile_with_exact_fields(user, client_jwt):
    response = client_jwt.get("/api/user/me")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == ME_FIELDS
    assert body["id"] == str(user.pk)
    assert body["email"] == user.email
    assert body["plan"] == "free"
    assert body["matrixId"] is None
    assert (body["matrixStatus"], body["matrixInbound"], body["matrixOutbound"]) == (
        "none",
        True,
        True,
    )
    assert isinstance(body["createdAt"], int)
    assert abs(body["createdAt"] - time.time() * 1000) < 60_000


@pytest.mark.django_db
@pytest.mark.parametrize(
    "matrix_id",
    [
        "@alice:example.org",
        "@a.b_c=d/e+f-9:matrix.example.com:8448",
        "@bob:[::1]:8448",
        "@carol:127.0.0.1",
    ],
)
def test_a_valid_matrix_id_is_stored_and_shown(client_jwt, matrix_id):
    response = client_jwt.put("/api/user/matrix", {"matrixId": matrix_id}, format="json")

    assert response.status_code == 200
    # Matrix is off in this test: the id is stored, and no room is made for it.
    assert response.json() == {"success": True, "matrixId": matrix_id, "matrixStatus": "none"}
    assert client_jwt.get("/api/user/me").json()["matrixId"] == matrix_id
    assert client_jwt.get("/api/dashboard").json()["matrixId"] == matrix_id


@pytest.mark.django_db
def test_null_clears_the_matrix_id(client_jwt):
    client_jwt.put("/api/user/matrix", {"matrixId": "@alice:example.org"}, format="json")

    response = client_jwt.put("/api/user/matrix", {"matrixId": None}, format="json")

    assert response.json() == {"success": True, "matrixId": None, "matrixStatus": "none"}
    assert client_jwt.get("/api/user/me").json()["matrixId"] is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    "matrix_id",
    [
        "alice",
        "alice:example.org",
        "@Alice:example.org",
        "@alice",
        "@alice:",
        "@:example.org",
        "@al ice:example.org",
        "@alice:exa mple.org",
        "@alice:example.org:port",
        "@" + "a" * 250 + ":example.org",
        "",
        123,
        True,
        ["@alice:example.org"],
    ],
)
def test_a_bad_matrix_id_is_rejected_and_nothing_changes(user, client_jwt, matrix_id):
    response = client_jwt.put("/api/user/matrix", {"matrixId": matrix_id}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "matrixId" in response.json()["fields"]
    user.refresh_from_db()
    assert user.matrix_id is None


@pytest.mark.django_db
def test_a_missing_matrix_id_is_rejected(client_jwt):
    response = client_jwt.put("/api/user/matrix", {}, format="json")

    assert response.status_code == 400
    assert "matrixId" in response.json()["fields"]


@pytest.mark.django_db
def test_notification_switches_are_set_one_at_a_time_and_shown(client_jwt):
    response = client_jwt.put("/api/user/notifications", {"matrixInbound": False}, format="json")

    mail_off = {"voicemailEmail": False, "missedCallEmail": False, "attachAudio": True}
    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "matrixInbound": False,
        "matrixOutbound": True,
        **mail_off,
    }
    response = client_jwt.put("/api/user/notifications", {"matrixOutbound": False}, format="json")
    assert response.json() == {
        "success": True,
        "matrixInbound": False,
        "matrixOutbound": False,
        **mail_off,
    }
    me = client_jwt.get("/api/user/me").json()
    assert (me["matrixInbound"], me["matrixOutbound"]) == (False, False)


@pytest.mark.django_db
def test_mail_switches_are_off_by_default_and_set_one_at_a_time(user, client_jwt):
    read = client_jwt.put("/api/user/notifications", {}, format="json").json()
    assert (read["voicemailEmail"], read["missedCallEmail"], read["attachAudio"]) == (
        False,
        False,
        True,
    )

    client_jwt.put("/api/user/notifications", {"voicemailEmail": True}, format="json")
    answer = client_jwt.put("/api/user/notifications", {"attachAudio": False}, format="json")

    assert answer.status_code == 200
    body = answer.json()
    assert (body["voicemailEmail"], body["missedCallEmail"], body["attachAudio"]) == (
        True,
        False,
        False,
    )
    user.refresh_from_db()
    assert (user.voicemail_email, user.missed_call_email, user.attach_audio) == (
        True,
        False,
        False,
    )
    assert (user.matrix_inbound, user.matrix_outbound) == (True, True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"matrixInbound": "false"},
        {"matrixInbound": 0},
        {"matrixOutbound": None},
        {"matrixOutbound": "yes"},
        {"matrixInbound": ["x"]},
        {"voicemailEmail": "true"},
        {"missedCallEmail": 1},
        {"attachAudio": None},
        {"attachAudio": {"deep": [[[[True]]]]}},
    ],
)
def test_notification_switches_take_json_booleans_only(user, client_jwt, body):
    response = client_jwt.put("/api/user/notifications", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert set(response.json()["fields"]) == set(body)
    user.refresh_from_db()
    assert (user.matrix_inbound, user.matrix_outbound) == (True, True)
    assert (user.voicemail_email, user.missed_call_email, user.attach_audio) == (
        False,
        False,
        True,
    )


@pytest.mark.django_db
def test_notification_switches_belong_to_the_caller(user, other_user, client_jwt):
    client_jwt.put("/api/user/notifications", {"matrixInbound": False}, format="json")

    other_user.refresh_from_db()
    assert other_user.matrix_inbound is True


@pytest.mark.django_db
def test_me_answers_exactly_these_bytes(settings):
    # The body as the interface promises it, byte for byte: keys, their order, separators.
    settings.PLANS = {
        "free": {
            "numbers": 5,
            "calls_per_day": 50,
            "call_seconds_per_day": None,
            "concurrent_calls": 3,
        }
    }
    user = UserFactory(
        id=uuid.UUID("9b2f6c1e-3d4a-4b8e-9f10-2a3b4c5d6e7f"),
        email="me@example.com",
        matrix_id="@me:matrix.example.com",
        created_at=datetime(2026, 11, 20, 12, 0, 0, 123456, tzinfo=UTC),
    )

    response = jwt_client(services.session_open(user=user).token).get("/api/user/me")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content == (
        b'{"id":"9b2f6c1e-3d4a-4b8e-9f10-2a3b4c5d6e7f","email":"me@example.com","plan":"free",'
        b'"matrixId":"@me:matrix.example.com","matrixStatus":"none","matrixInbound":true,'
        b'"matrixOutbound":true,"createdAt":1795176000123,"emailVerified":false,'
        b'"pendingEmail":null,"quotas":{"callsPerDay":{"limit":50,'
        b'"used":0,"resetsAt":null},"callSecondsPerDay":{"limit":null,"used":0,"resetsAt":null},'
        b'"concurrentCalls":{"limit":3,"used":0,"resetsAt":null}},"twoFactor":false}'
    )
