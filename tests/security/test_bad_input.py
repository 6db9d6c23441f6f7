"""Bad input that used to break things over HTTP (issue 12): each gets a 4xx JSON error now.

Bodies are written as JSON text, not built with json.dumps, so that they carry exactly what a
hostile client sends: `\\ud800` and `\\u0000` escapes, 30,000 brackets, a 5,000-digit number.
"""

import logging

import pytest

from calls.models import Call
from core.parsing import MAX_JSON_DEPTH
from tests.factories import NumberFactory

pytestmark = pytest.mark.django_db

LONE_SURROGATE = r"\ud800"
NUL = r"\u0000"
DEEP = "[" * 30_000 + "]" * 30_000  # about 60 KB: under the 64 KiB body limit
HUGE_INT = "9" * 5_000


def post_raw(client, path: str, text: str, method: str = "post"):
    return getattr(client, method)(path, text.encode(), content_type="application/json")


def assert_error(response, status: int = 400, code: str = "invalid_request") -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["error"], str) and body["error"]
    assert set(body) <= {"error", "code", "fields"}
    return body


@pytest.mark.parametrize("path", ["/api/auth/register", "/api/auth/login"])
def test_a_lone_surrogate_in_the_email_is_a_400_naming_the_field(api_client, path):
    text = f'{{"email": "a{LONE_SURROGATE}@example.com", "password": "a-long-passphrase"}}'

    body = assert_error(post_raw(api_client, path, text))

    assert "email" in body["fields"]


@pytest.mark.parametrize("field", ["message", "callId"])
@pytest.mark.parametrize("escape", [LONE_SURROGATE, NUL], ids=["lone-surrogate", "nul"])
def test_a_bad_character_in_a_call_is_a_400_naming_the_field(client_jwt, field, escape):
    values = {"callId": "c1", "to": "+442079460120", "message": "Hello"}
    values[field] = f"x{escape}y"
    text = "{" + ", ".join(f'"{k}": "{v}"' for k, v in values.items()) + "}"

    body = assert_error(post_raw(client_jwt, "/api/calls", text))

    assert list(body["fields"]) == [field]
    assert not Call.objects.exists()


JSON_ENDPOINTS = [
    ("post", "/api/auth/register"),
    ("post", "/api/auth/login"),
    ("put", "/api/user/matrix"),
    ("delete", "/api/user/me"),
    ("post", "/api/captcha/verify"),
    ("post", "/api/numbers"),
    ("put", "/api/numbers/{number}/alias"),
    ("put", "/api/numbers/{number}/pin"),
    ("post", "/api/numbers/{number}/blocked"),
    ("delete", "/api/numbers/{number}/blocked"),
    ("post", "/api/numbers/{number}/members"),
    ("post", "/api/calls"),
]


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


@pytest.mark.parametrize(("method", "path"), JSON_ENDPOINTS)
def test_deeply_nested_json_is_a_400_on_every_json_endpoint(client_jwt, number, method, path):
    response = post_raw(client_jwt, path.format(number=number.pk), DEEP, method)

    body = assert_error(response)
    assert f"deeper than {MAX_JSON_DEPTH} levels" in body["error"]


def test_nesting_at_the_limit_is_parsed_and_judged_as_a_value(client_jwt):
    inner = MAX_JSON_DEPTH - 1  # inside the body's own object
    nested = "[" * inner + "]" * inner
    text = f'{{"callId": "c1", "to": "+442079460120", "message": {nested}}}'

    body = assert_error(post_raw(client_jwt, "/api/calls", text))

    assert body["fields"] == {"message": ["Must be a string."]}


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/api/calls", f'{{"callId": "c1", "to": "+442079460120", "message": {HUGE_INT}}}'),
        ("/api/captcha/verify", f'{{"a": {HUGE_INT}, "b": 1, "answer": 2}}'),
        ("/api/auth/login", f"[-{HUGE_INT}]"),
    ],
)
def test_a_five_thousand_digit_integer_is_reported_as_too_large(client_jwt, path, text):
    body = assert_error(post_raw(client_jwt, path, text))

    assert body["error"] == "A number in the request body is too large (more than 100 digits)."


def test_a_body_that_is_not_utf8_is_a_400(api_client):
    response = api_client.post(
        "/api/auth/login", b'{"email": "\xff"}', content_type="application/json"
    )

    assert_error(response)


def test_a_bad_character_in_an_object_key_is_refused_too(api_client):
    text = f'{{"email": "a@example.com", "password": "a-long-passphrase", "x{NUL}": 1}}'

    body = assert_error(post_raw(api_client, "/api/auth/login", text))

    assert list(body["fields"]) == ["x\N{REPLACEMENT CHARACTER}"]


@pytest.mark.parametrize("call_id", ["%00", "a%01b"])
def test_a_call_id_with_control_characters_in_the_path_is_not_found(client_jwt, call_id):
    assert_error(client_jwt.get(f"/api/calls/{call_id}"), 404, "not_found")
    assert_error(client_jwt.post(f"/api/calls/{call_id}/cancel"), 404, "not_found")


@pytest.mark.parametrize("path", ["/api/history", "/api/calls"])
def test_a_five_thousand_digit_limit_is_clamped(client_jwt, path):
    response = client_jwt.get(path, {"limit": HUGE_INT})

    assert response.status_code == 200
    assert response.json()["limit"] == 200


@pytest.mark.parametrize("offset", [HUGE_INT, str(10**18)])
@pytest.mark.parametrize("path", ["/api/history", "/api/calls"])
def test_an_offset_past_a_64_bit_integer_is_a_400_naming_it(client_jwt, path, offset):
    body = assert_error(client_jwt.get(path, {"offset": offset}))

    assert list(body["fields"]) == ["offset"]


def test_the_largest_offset_is_an_empty_page(client_jwt):
    response = client_jwt.get("/api/history", {"offset": str(10**18 - 1)})

    assert response.status_code == 200
    assert response.json()["history"] == []


def test_a_disallowed_host_is_a_400_logged_as_one_warning_line(api_client, caplog):
    caplog.set_level(logging.INFO)

    response = api_client.get("/healthz", HTTP_HOST="evil.example")

    assert_error(response)
    refused = [r for r in caplog.records if "evil.example" in r.getMessage()]
    assert [(r.levelname, r.exc_info) for r in refused] == [("WARNING", None)]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
