import logging

import pytest

from relay.logging import RedactSecretsFilter, redact
from tests.conftest import api_key_client, jwt_client

PASSWORD = "a-long-and-unusual-passphrase"


@pytest.mark.django_db
def test_logs_of_requests_carrying_secrets_contain_none_of_them(api_client, caplog):
    caplog.set_level(logging.DEBUG)
    body = api_client.post(
        "/api/auth/register", {"email": "log@example.com", "password": PASSWORD}, format="json"
    ).json()
    token, key = body["token"], body["user"]["apiKey"]
    api_client.post(
        "/api/auth/login", {"email": "log@example.com", "password": "wrong-one-1"}, format="json"
    )
    jwt_client(token).get("/api/user/me?token=" + token)
    api_key_client(key).get("/api/dashboard")
    jwt_client(token + "x").get("/api/user/me")
    new_key = jwt_client(token).post("/api/user/regenerate-api-key").json()["apiKey"]

    text = caplog.text
    assert "POST /api/auth/register 201" in text  # the access line is there...
    assert "GET /api/user/me 200" in text
    for secret in (PASSWORD, "wrong-one-1", token, key, new_key, token.split(".")[1]):
        assert secret not in text  # ...and no secret is


def test_the_redaction_filter_scrubs_tokens_keys_and_passwords():
    record = logging.LogRecord(
        "x",
        logging.INFO,
        __file__,
        1,
        "GET /ws?token=eyJhbGciOi.eyJzdWIiOiIx.sig key=%s "
        "Authorization: Bearer abc.def password=hunter22",
        ("vr_" + "k" * 40,),
        None,
    )

    RedactSecretsFilter().filter(record)

    message = record.getMessage()
    for secret in ("eyJhbGciOi", "vr_kkkk", "abc.def", "hunter22"):
        assert secret not in message
    assert redact("nothing secret here") == "nothing secret here"
