"""DELETE /api/user/me: the password (and the second factor's hook), then everything of the
user goes in one go, calls in progress ended first; only a fraud record may stay."""

import pytest
from asgiref.sync import sync_to_async

from accounts import services
from accounts.models import DialRefusal, FraudRecord, LoginSession, User
from calls.models import Call, Recording
from calls.states import CallState
from core.recordings import recordings_storage
from mail.models import OutboundMail
from mail.services import mail_queue
from matrix.models import MatrixRoom
from tests.accounts.data import holdings_of
from tests.conftest import jwt_client
from tests.factories import DEFAULT_PASSWORD, CallFactory, two_factor_on
from tests.records import records_count
from virtual_numbers.models import InventoryNumber, Number
from virtual_numbers.services import number_grant
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED_4401 = {"type": "websocket.close", "code": 4401}


def delete_me(client, body=None, **extra):
    body = {"password": DEFAULT_PASSWORD} if body is None else body
    return client.delete("/api/user/me", body, format="json", **extra)


def test_deleting_the_account_leaves_nothing_of_the_user(client_jwt, user, other_user):
    held = holdings_of(user)
    theirs = holdings_of(other_user, seconds=0.5, call_id="their-call")
    MatrixRoom.objects.create(user=user, matrix_id="@owner:matrix.example.com")
    entry = held.number.inventory

    response = delete_me(client_jwt)

    assert response.status_code == 204
    assert response.content == b""
    assert not User.objects.filter(pk=user.pk).exists()
    for model, owner in (
        (Number, "owner"),
        (Recording, "call__owner"),
        (Call, "owner"),
        (WebhookEndpoint, "user"),
        (WebhookDelivery, "user"),
        (LoginSession, "user"),
        (DialRefusal, "user"),
        (MatrixRoom, "user"),
    ):
        assert not model.objects.filter(**{f"{owner}_id": user.pk}).exists(), model
    assert not recordings_storage().exists(held.voicemail.recording)
    assert not recordings_storage().exists(held.recording.name)  # a call's, too
    # The number is back in the inventory, free for the next user.
    assert InventoryNumber.objects.filter(pk=entry.pk, holding__isnull=True).exists()
    # Nothing of anyone else moved.
    assert Number.objects.filter(pk=theirs.number.pk).exists()
    assert records_count(pk=theirs.voicemail.pk) > 0
    assert recordings_storage().exists(theirs.voicemail.recording)
    assert recordings_storage().exists(theirs.recording.name)
    assert Call.objects.filter(pk=theirs.call.pk).exists()
    assert WebhookEndpoint.objects.filter(user=other_user).exists()


def test_the_mail_to_a_deleted_user_goes_with_the_account(client_jwt, user, other_user):

    for to in (user.email, other_user.email):
        mail_queue(to=to, template="password_changed", context={"email": to})

    assert delete_me(client_jwt).status_code == 204

    assert list(OutboundMail.objects.values_list("to", flat=True)) == [other_user.email]


def test_a_deleted_users_number_can_be_taken_again_after_its_quarantine(
    client_jwt, user, other_user, clock, settings
):
    settings.NUMBER_QUARANTINE_HOURS = 24
    held = holdings_of(user)

    assert delete_me(client_jwt).status_code == 204
    clock.advance(hours=24, seconds=1)

    again = number_grant(
        user=other_user, alias="Mine now", pin="4321", preferred=held.number.number
    )
    assert again.number == held.number.number
    assert not records_count(number=again) > 0  # no history comes with it


def test_the_tokens_and_the_api_key_die_with_the_account(client_jwt, client_key, user, login):
    other = services.session_open(user=user)

    assert delete_me(client_key).status_code == 204

    for client in (client_jwt, jwt_client(other.token), client_key):
        response = client.get("/api/user/me")
        assert response.status_code == 401
        assert response.json()["code"] == "authentication_failed"


def test_a_flagged_account_leaves_a_fraud_record_without_its_address(client_jwt, user):
    holdings_of(user)
    User.objects.filter(pk=user.pk).update(fraud_flagged_at=user.created_at)

    assert delete_me(client_jwt).status_code == 204

    [record] = FraudRecord.objects.all()
    assert record.email_digest == services.email_digest(user.email.upper())
    assert record.flagged_at == user.created_at
    assert record.refusals == {"destination:premium_rate": 1}
    kept = str(FraudRecord.objects.values().get())
    assert user.email not in kept and str(user.pk) not in kept


def test_an_account_with_nothing_to_review_leaves_no_fraud_record(client_jwt, user):
    assert delete_me(client_jwt).status_code == 204

    assert not FraudRecord.objects.exists()


def test_a_wrong_password_deletes_nothing(client_jwt, user):
    held = holdings_of(user)

    response = delete_me(client_jwt, {"password": "not-the-password"})

    assert response.status_code == 403
    assert response.json() == {
        "error": "The current password is wrong.",
        "code": "password_mismatch",
    }
    assert Number.objects.filter(pk=held.number.pk).exists()
    assert client_jwt.get("/api/user/me").status_code == 200


def test_wrong_passwords_count_toward_the_login_rate_limit(client_jwt, api_client, user, settings):
    settings.RATE_LIMIT_AUTH_PER_EMAIL = "2/m"
    for _ in range(2):
        assert delete_me(client_jwt, {"password": "not-the-password"}).status_code == 403

    refused = delete_me(client_jwt)
    login = api_client.post(
        "/api/auth/login", {"email": user.email, "password": DEFAULT_PASSWORD}, format="json"
    )

    for response in (refused, login):
        assert response.status_code == 429
        assert response.json()["code"] == "rate_limited"
    assert User.objects.filter(pk=user.pk).exists()


def test_with_a_second_factor_the_code_is_needed_before_anything_goes(client_jwt, login, user):
    secret, recovery = two_factor_on(user, keep=login.session)

    missing = delete_me(client_jwt, {"password": DEFAULT_PASSWORD})
    wrong = delete_me(client_jwt, {"password": DEFAULT_PASSWORD, "otp": "000000"})

    assert (missing.status_code, missing.json()["code"]) == (401, "otp_required")
    assert (wrong.status_code, wrong.json()["code"]) == (401, "otp_invalid")
    assert User.objects.filter(pk=user.pk).exists()
    done = delete_me(client_jwt, {"password": DEFAULT_PASSWORD, "otp": recovery[0]})
    assert done.status_code == 204
    assert not User.objects.filter(pk=user.pk).exists()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"password": None},
        {"password": 12345678},
        {"password": "x" * 10_000},
        {"password": DEFAULT_PASSWORD, "otp": "1" * 65},
        {"password": DEFAULT_PASSWORD, "otp": 123456},
    ],
    ids=["missing", "null", "number", "huge", "otp-huge", "otp-number"],
)
def test_a_bad_body_is_a_400_and_deletes_nothing(client_jwt, user, body):
    response = delete_me(client_jwt, body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert User.objects.filter(pk=user.pk).exists()


@pytest.mark.parametrize("escape", [r"\u0000", r"\ud800"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("field", ["password", "otp"])
def test_nul_or_a_lone_surrogate_is_a_400_naming_the_field(client_jwt, user, escape, field):
    values = {"password": DEFAULT_PASSWORD, "otp": "123456"}
    values[field] = f"a{escape}b"
    text = "{" + ", ".join(f'"{k}": "{v}"' for k, v in values.items()) + "}"

    response = client_jwt.delete("/api/user/me", text.encode(), content_type="application/json")

    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert User.objects.filter(pk=user.pk).exists()


def test_deleting_needs_credentials(api_client, user):
    response = delete_me(api_client)

    assert response.status_code == 401
    assert User.objects.filter(pk=user.pk).exists()


async def test_calls_in_progress_end_first_and_every_socket_closes_4401(communicator, user):
    ringing = await sync_to_async(CallFactory)(
        owner=user, call_id="up-now", status=CallState.RINGING
    )
    await sync_to_async(CallFactory)(owner=user, call_id="done", status=CallState.BUSY)
    socket, connected = await communicator(user)
    key = await sync_to_async(lambda: user.api_key)()
    by_key, key_connected = await communicator(headers=[(b"x-api-key", key.encode())])
    assert connected and key_connected
    ended = []
    # Each end of a call goes through the one transition of the pipeline: count them.
    from realtime import pipeline

    real = pipeline.call_transition

    def counted(*, call, step, expected_status):
        moved = real(call=call, step=step, expected_status=expected_status)
        ended.append((call.call_id, step.status, moved))
        return moved

    pipeline.call_transition = counted
    try:
        await sync_to_async(services.user_delete)(
            user=user, password=DEFAULT_PASSWORD, otp=None, ip="192.0.2.1"
        )
    finally:
        pipeline.call_transition = real

    assert ended == [("up-now", CallState.CANCELED, True)]
    status = await socket.receive_json_from(timeout=5)
    assert (status["type"], status["callId"], status["status"]) == (
        "call_status",
        ringing.call_id,
        "canceled",
    )
    assert await socket.receive_output(timeout=5) == CLOSED_4401
    assert (await by_key.receive_json_from(timeout=5))["status"] == "canceled"
    assert await by_key.receive_output(timeout=5) == CLOSED_4401
    assert not await Call.objects.filter(owner_id=user.pk).aexists()


def test_another_users_id_or_address_in_the_body_deletes_only_the_caller(
    client_jwt, user, other_user
):
    body = {"password": DEFAULT_PASSWORD, "id": str(other_user.pk), "email": other_user.email}

    assert delete_me(client_jwt, body).status_code == 204

    assert not User.objects.filter(pk=user.pk).exists()
    assert User.objects.filter(pk=other_user.pk).exists()


def test_staff_find_a_deleted_accounts_fraud_record_by_its_address(client_jwt, user, staff_client):
    holdings_of(user)
    assert delete_me(client_jwt).status_code == 204

    found = staff_client.get("/admin/accounts/fraudrecord/", {"q": user.email.upper()})
    missed = staff_client.get("/admin/accounts/fraudrecord/", {"q": "someone@example.com"})

    assert found.status_code == missed.status_code == 200
    assert "destination:premium_rate" in found.content.decode()
    assert "destination:premium_rate" not in missed.content.decode()
