"""GET /api/user/export: a zip of everything Relay keeps of the caller, opened and read."""

import io
import json
import wave
import zipfile

import pytest

from mail.services import mail_queue
from tests.accounts.data import WEBHOOK_SECRET, holdings_of
from tests.conftest import api_key_client

pytestmark = pytest.mark.django_db


def archive_of(response) -> zipfile.ZipFile:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="relay-export-')
    body = b"".join(response.streaming_content)
    return zipfile.ZipFile(io.BytesIO(body))


def account_json(archive: zipfile.ZipFile) -> dict:
    return json.loads(archive.read("account.json"))


def test_the_export_holds_the_account_and_every_voicemail(client_jwt, user):
    held = holdings_of(user)

    archive = archive_of(client_jwt.get("/api/user/export"))
    account = account_json(archive)

    assert (account["format"], account["version"]) == ("relay-account-export", 1)
    assert isinstance(account["exportedAt"], int)
    assert account["profile"] == {
        "id": str(user.pk),
        "email": user.email,
        "plan": "free",
        "matrixId": "@owner:matrix.example.com",
        "matrixStatus": "none",
        "matrixInbound": True,
        "matrixOutbound": True,
        "ringPhone": None,
        "createdAt": account["profile"]["createdAt"],
    }
    assert len(account["sessions"]) == 1
    assert account["dialRefusals"][0]["reason"] == "premium_rate"
    [number] = account["numbers"]
    assert (number["id"], number["alias"], number["greeting"]) == (
        str(held.number.pk),
        "Office",
        "Leave a message",
    )
    assert number["forwarding"] == {
        "targets": ["+447700900001"],
        "ringSeconds": 25,
        "screening": True,
        "callerId": "caller",
    }
    assert number["ringing"] == {
        "strategy": "all",
        "ringSeconds": 25,
        "screening": True,
        "callerId": "caller",
        "entries": [{"phone": "+447700900001"}],
    }
    assert [entry["caller_num"] for entry in number["blocked"]] == ["+447700900666"]
    [record] = account["history"]
    assert record["id"] == str(held.voicemail.pk)
    assert record["recording_file"] == f"voicemail/{held.voicemail.pk}.wav"
    [call] = account["calls"]
    assert (call["callId"], call["message"]) == ("call-kept", "Hello from the test")
    [recording] = call["recordings"]
    assert recording["id"] == str(held.recording.pk)
    assert archive.read(f"recordings/{held.recording.pk}.wav") == held.audio
    assert account["webhook"]["url"] == "https://hooks.example.com/relay"
    assert "secret" not in account["webhook"]
    audio = archive.read(record["recording_file"])
    assert audio == held.audio
    with wave.open(io.BytesIO(audio)) as wav:
        assert wav.getframerate() == 8000


def test_no_secret_is_in_the_export(client_jwt, user):
    holdings_of(user)

    archive = archive_of(client_jwt.get("/api/user/export"))

    everything = b"".join(archive.read(name) for name in archive.namelist())
    for secret in (WEBHOOK_SECRET, user.api_key, user.password):
        assert secret.encode() not in everything


def test_nothing_of_another_user_is_in_the_export(client_jwt, user, other_user):
    holdings_of(user)
    theirs = holdings_of(other_user, seconds=0.5, call_id="their-call")

    archive = archive_of(client_jwt.get("/api/user/export"))

    names = archive.namelist()
    assert f"voicemail/{theirs.voicemail.pk}.wav" not in names
    text = archive.read("account.json").decode()
    for trace in (
        other_user.email,
        str(other_user.pk),
        theirs.number.number,
        str(theirs.voicemail.pk),
        "their-call",
    ):
        assert trace not in text
    assert all(archive.read(name) != theirs.audio for name in names)


def test_a_user_with_nothing_gets_empty_sections(client_jwt, user):
    account = account_json(archive_of(client_jwt.get("/api/user/export")))

    assert (account["numbers"], account["history"], account["calls"]) == ([], [], [])
    assert account["webhook"] is None
    assert archive_of(client_jwt.get("/api/user/export")).namelist() == ["account.json"]


def test_a_voicemail_file_gone_is_left_out_not_a_failure(client_jwt, user):
    from core.recordings import recordings_storage

    held = holdings_of(user)
    recordings_storage().delete(held.voicemail.recording)
    recordings_storage().delete(held.recording.name)  # a call's recording, too

    archive = archive_of(client_jwt.get("/api/user/export"))

    assert archive.namelist() == ["account.json"]


def test_the_export_answers_whatever_accept_says_and_with_an_api_key(user):
    response = api_key_client(user.api_key).get("/api/user/export", HTTP_ACCEPT="application/zip")

    assert account_json(archive_of(response))["profile"]["email"] == user.email


def test_the_export_is_rate_limited_per_user(client_jwt, client_key, settings):
    settings.RATE_LIMIT_EXPORT_PER_USER = "2/h"
    assert client_jwt.get("/api/user/export").status_code == 200
    assert client_key.get("/api/user/export").status_code == 200

    response = client_jwt.get("/api/user/export", HTTP_ACCEPT="application/zip")

    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"
    assert int(response["Retry-After"]) >= 1


def test_the_export_needs_credentials(api_client):
    response = api_client.get("/api/user/export")

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_the_export_takes_no_other_method(client_jwt):
    assert client_jwt.post("/api/user/export").status_code == 405


def test_the_mail_sent_to_the_user_is_listed_without_its_parts(client_jwt, user, other_user):

    context = {"email": user.email, "reset_url": "https://relay.example/x/secret-link"}
    mail_queue(to=user.email, template="password_reset", context=context)
    mail_queue(to=other_user.email, template="password_reset", context=context)

    (listed,) = account_json(archive_of(client_jwt.get("/api/user/export")))["mail"]

    assert (listed["kind"], listed["to"], listed["status"]) == (
        "password_reset",
        user.email,
        "pending",
    )
    assert listed["sentAt"] is None and "secret-link" not in json.dumps(listed)
