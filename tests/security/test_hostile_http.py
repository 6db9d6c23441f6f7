"""Hypothesis against every JSON endpoint and the list queries, through Django's test client:
whatever a hostile client sends, the answer is never a 5xx, and every error is the documented
JSON shape. The regressions this guards are in test_bad_input.py; this finds the next ones.

The test client re-raises a view's exception, so a crash fails with its traceback and
Hypothesis shrinks the input that caused it.
"""

import pytest
from hypothesis import given

from tests.factories import NumberFactory
from tests.hostile import (
    FUZZ,
    assert_error_shape,
    documents,
    fill,
    hostile_text,
    path_segment,
    query_params,
    query_string,
)
from virtual_numbers.models import InventoryNumber

pytestmark = pytest.mark.django_db

# Every JSON endpoint with a valid value for each of its fields (as JSON text).
ENDPOINTS = {
    "register": (
        "post",
        "/api/auth/register",
        {"email": '"__UNIQUE__@example.com"', "password": '"a-long-passphrase"'},
    ),
    "login": (
        "post",
        "/api/auth/login",
        {"email": '"fuzz@example.com"', "password": '"a-long-passphrase"', "otp": '"123456"'},
    ),
    "2fa confirm": ("post", "/api/user/2fa/confirm", {"code": '"123456"'}),
    "2fa disable": (
        "delete",
        "/api/user/2fa",
        {"password": '"correct-horse-battery-staple"', "code": '"123456"'},
    ),
    "matrix": ("put", "/api/user/matrix", {"matrixId": '"@fuzz:example.org"'}),
    # A wrong password: each example is answered 403 or 400, and the user stays for the next.
    "account delete": (
        "delete",
        "/api/user/me",
        {"password": '"not-the-password"', "otp": '"123456"'},
    ),
    "numbers create": (
        "post",
        "/api/numbers",
        {"alias": '"Office"', "pin": '"1234"', "captchaToken": '"__CAPTCHA__"'},
    ),
    "numbers alias": ("put", "/api/numbers/{number}/alias", {"alias": '"Home"'}),
    "numbers pin": (
        "put",
        "/api/numbers/{number}/pin",
        {"currentPin": '"1234"', "newPin": '"4321"'},
    ),
    "blocked add": ("post", "/api/numbers/{number}/blocked", {"caller_num": '"+447700900123"'}),
    "blocked remove": (
        "delete",
        "/api/numbers/{number}/blocked",
        {"caller_num": '"+447700900123"'},
    ),
    "numbers hours": (
        "put",
        "/api/numbers/{number}/hours",
        {
            "timeZone": '"Europe/London"',
            "weekly": '[{"days": ["mon", "fri"], "start": "09:00", "end": "17:30"}]',
            "closedDates": '["2026-12-25"]',
            "doNotDisturb": "false",
            "closedGreeting": '"Closed."',
        },
    ),
    "members invite": (
        "post",
        "/api/numbers/{number}/members",
        {"email": '"__UNIQUE__@example.com"', "role": '"member"'},
    ),
    "captcha verify": (
        "post",
        "/api/captcha/verify",
        {"a": "1", "b": "2", "answer": "3", "challengeId": "null"},
    ),
    "calls submit": (
        "post",
        "/api/calls",
        {
            "callId": '"__UNIQUE__"',
            "to": '"+442079460120"',
            "message": '"Hello"',
            "from": "null",
        },
    ),
}


@pytest.fixture
def open_limits(settings):
    """Rate limits out of the way, so that examples reach the validation behind them."""
    for name in (
        "AUTH_PER_IP",
        "AUTH_PER_EMAIL",
        "CAPTCHA_VERIFY_PER_IP",
        "CALLS_PER_USER",
        "FORWARDING_PER_USER",
        "INVITATIONS_PER_USER",
    ):
        setattr(settings, f"RATE_LIMIT_{name}", "1000000/m")


@pytest.fixture
def number(user, inventory):
    return NumberFactory(owner=user, inventory=InventoryNumber.objects.first())


def check(response) -> None:
    assert response.status_code < 500, response.content[:500]
    assert response["Content-Type"] == "application/json", response.content[:200]
    body = response.json()
    if response.status_code >= 400:
        assert_error_shape(body)


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_no_json_body_gets_a_server_error(endpoint, client_jwt, number, captcha_token, open_limits):
    method, path, valid = ENDPOINTS[endpoint]
    url = path.format(number=number.pk)

    @FUZZ
    @given(text=documents(valid))
    def run(text):
        body = fill(text, captcha_token=captcha_token)
        data = body.encode("utf-8", "surrogatepass")  # a raw lone surrogate as its bytes
        check(getattr(client_jwt, method)(url, data, content_type="application/json"))

    run()


LIST_QUERIES = {
    "/api/history": ["status", "limit", "offset", "number_id", "before"],
    "/api/calls": ["status", "limit", "offset", "before"],
}


@pytest.mark.parametrize("path", list(LIST_QUERIES))
def test_no_list_query_gets_a_server_error(path, client_jwt, number):
    names = LIST_QUERIES[path]

    @FUZZ
    @given(params=query_params(names))
    def run(params):
        check(client_jwt.get(f"{path}?{query_string(params)}"))

    run()


ID_ROUTES = [
    ("get", "/api/calls/{}"),
    ("post", "/api/calls/{}/cancel"),
    ("delete", "/api/numbers/{}"),
    ("get", "/api/numbers/{}/blocked"),
    ("get", "/api/numbers/{}/hours"),
    ("get", "/api/numbers/{}/members"),
    ("get", "/api/numbers/shared/{}"),
    ("put", "/api/numbers/shared/{}"),
    ("delete", "/api/user/sessions/{}"),
    ("post", "/api/invitations/{}/accept"),
]


@pytest.mark.parametrize(("method", "route"), ID_ROUTES)
def test_no_id_in_a_path_gets_a_server_error(method, route, client_jwt):
    @FUZZ
    @given(raw=hostile_text)
    def run(raw):
        check(getattr(client_jwt, method)(route.format(path_segment(raw))))

    run()
