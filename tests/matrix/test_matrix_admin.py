"""Staff see the bot's outbox in admin (status, attempts, last error) and can retry a row."""

from __future__ import annotations

import pytest
from django_tasks_db.models import DBTaskResult

from matrix.models import MatrixMessage, MatrixRoom, MessageStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_row(user) -> MatrixMessage:
    room = MatrixRoom.objects.create(
        user=user, matrix_id="@alice:localhost", room_id="!r:localhost"
    )
    return MatrixMessage.objects.create(
        key="inbound:1",
        room=room,
        kind="inbound",
        body="Call from +447700900123: missed.",
        status=MessageStatus.FAILED,
        attempts=7,
        last_error="homeserver unreachable: ConnectError",
    )


def test_staff_see_the_outbox_with_status_attempts_and_last_error(staff_client, failed_row):
    page = staff_client.get("/admin/matrix/matrixmessage/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "Given up" in text and ">7<" in text
    assert "homeserver unreachable: ConnectError" in text


def test_the_retry_action_queues_the_row_again(staff_client, failed_row):
    response = staff_client.post(
        "/admin/matrix/matrixmessage/",
        {"action": "retry", "_selected_action": [failed_row.pk]},
        follow=True,
    )

    assert response.status_code == 200
    failed_row.refresh_from_db()
    assert failed_row.status == MessageStatus.PENDING
    queued = DBTaskResult.objects.filter(task_path="matrix.tasks.deliver_matrix_message")
    assert [task.args_kwargs["kwargs"] for task in queued] == [{"message_id": failed_row.pk}]


def test_outsiders_cannot_see_the_outbox(client, user, failed_row):
    client.force_login(user)

    page = client.get("/admin/matrix/matrixmessage/")

    assert page.status_code == 302
