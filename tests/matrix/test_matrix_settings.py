"""Matrix is off until all three of its settings are given; a wrong one stops start-up with
one line naming it; and while it is off, nothing is queued for anyone."""

from __future__ import annotations

from functools import partial

import pytest

from harness import live, ports
from history.services import record_inbound_call
from matrix.models import MatrixMessage, MatrixRoom
from realtime.services import call_submit
from tests import settings_env
from tests.conftest import drain_tasks
from tests.factories import NumberFactory
from tests.records import records_count

GOOD = {
    "MATRIX_HOMESERVER_URL": "http://127.0.0.1:8008",
    "MATRIX_BOT_ACCESS_TOKEN": "syt_bot_token_for_the_settings_test",
    "MATRIX_BOT_USER_ID": "@relay:localhost",
}
manage = partial(settings_env.manage, **GOOD)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MATRIX_HOMESERVER_URL", ""),
        ("MATRIX_HOMESERVER_URL", "matrix.example.com"),
        ("MATRIX_BOT_ACCESS_TOKEN", ""),
        ("MATRIX_BOT_USER_ID", ""),
        ("MATRIX_BOT_USER_ID", "relay"),
    ],
)
def test_a_wrong_matrix_setting_stops_start_up_with_one_line(name, value):
    result = manage("check", **{name: value})

    live.assert_refused_at_start_up(result, name)
    assert GOOD["MATRIX_BOT_ACCESS_TOKEN"] not in result.stderr


def test_good_matrix_settings_start():
    result = manage("check")

    assert result.returncode == 0, result.stderr


def test_the_bot_will_not_run_with_matrix_off():
    env = {
        k: "" for k in ("MATRIX_HOMESERVER_URL", "MATRIX_BOT_ACCESS_TOKEN", "MATRIX_BOT_USER_ID")
    }
    result = manage("matrix_bot", "--once", **env)

    assert result.returncode != 0
    assert "Matrix is off" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_with_matrix_off_a_matrix_id_is_stored_and_nothing_is_queued(settings, user, client_jwt):
    settings.MATRIX_ENABLED = False
    response = client_jwt.put("/api/user/matrix", {"matrixId": "@alice:localhost"}, format="json")

    assert response.json() == {
        "success": True,
        "matrixId": "@alice:localhost",
        "matrixStatus": "none",
    }
    record_inbound_call(
        number=NumberFactory(owner=user), caller_num="+447700900123", status="missed", duration=0
    )
    call_submit(user=user, data={"callId": "c-1", "to": "+442079460123", "message": "Hi"})
    drain_tasks()
    assert not MatrixRoom.objects.exists()
    assert not MatrixMessage.objects.exists()


@pytest.fixture
def homeserver_down(settings):
    """Matrix on, its homeserver a port where nothing listens."""
    settings.MATRIX_ENABLED = True
    settings.MATRIX_HOMESERVER_URL = f"http://127.0.0.1:{ports.free_port()}"
    settings.MATRIX_BOT_ACCESS_TOKEN = "syt_unused"
    settings.MATRIX_BOT_USER_ID = "@relay:localhost"


@pytest.mark.django_db
def test_an_unreachable_homeserver_is_a_503_and_nothing_changes(homeserver_down, user, client_jwt):
    response = client_jwt.put("/api/user/matrix", {"matrixId": "@alice:localhost"}, format="json")

    assert response.status_code == 503
    assert response.json()["code"] == "matrix_unavailable"
    assert response["Retry-After"] == "30"
    user.refresh_from_db()
    assert user.matrix_id is None
    assert not MatrixRoom.objects.exists()


@pytest.mark.django_db
def test_setting_new_matrix_ids_is_rate_limited(homeserver_down, settings, user, client_jwt):
    """Each new id is a room and an invite, and the answer says whether an id exists."""
    settings.RATE_LIMIT_MATRIX_ID_PER_USER = "2/h"

    statuses = [
        client_jwt.put("/api/user/matrix", {"matrixId": f"@user{n}:localhost"}, format="json")
        for n in range(3)
    ]

    assert [r.status_code for r in statuses] == [503, 503, 429]
    assert statuses[2].json()["code"] == "rate_limited"
    assert int(statuses[2]["Retry-After"]) > 0
    # Clearing the id is never limited.
    cleared = client_jwt.put("/api/user/matrix", {"matrixId": None}, format="json")
    assert cleared.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_failing_notice_never_undoes_the_call_record(settings, user, monkeypatch, caplog):
    """Fault injection in Relay's own code: building the notice raises. The record still
    commits, with nothing queued, and the failure is logged."""
    from matrix import texts

    settings.MATRIX_ENABLED = True
    room = MatrixRoom.objects.create(user=user, matrix_id="@alice:localhost", status="joined")

    def broken(event):
        raise RuntimeError("a bug in the notice")

    monkeypatch.setattr(texts, "inbound_call", broken)
    record = record_inbound_call(
        number=NumberFactory(owner=user), caller_num="+447700900123", status="missed", duration=0
    )

    assert records_count(pk=record.pk) > 0
    assert not room.messages.exists()
    assert "no notice queued for a call_record" in caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("answered_by", "forwarded_to", "says"),
    [
        ("forward", "+447400123456", "answered on +447400123456, 30 s."),
        ("voicemail", None, "voicemail, 30 s."),
        ("app", None, "answered by its voice app, 30 s."),
        (None, None, "answered, 30 s."),
    ],
)
def test_the_notice_says_who_answered(settings, user, answered_by, forwarded_to, says):
    settings.MATRIX_ENABLED = True
    room = MatrixRoom.objects.create(user=user, matrix_id="@alice:localhost", status="joined")

    record_inbound_call(
        number=NumberFactory(owner=user, alias="Office"),
        caller_num="+447700900123",
        status="answered",
        duration=30,
        answered_by=answered_by,
        forwarded_to=forwarded_to,
    )

    (message,) = room.messages.all()
    assert message.body.endswith(f"(Office): {says}"), message.body
