"""The error-code registry: every code with its status, as DESIGN §5.2 fixes them, listed in
docs/errors.md and in the schema's enum; a code outside the registry cannot be raised."""

import re

import pytest
from django.conf import settings

from core.errors import ApplicationError, ErrorCode

# DESIGN.md §5.2, table "situation | status | code", plus codes the design names elsewhere.
DESIGN_5_2 = {
    "invalid_request": 400,
    "captcha_wrong_answer": 400,
    "captcha_invalid": 400,
    "not_authenticated": 401,
    "authentication_failed": 401,
    "invalid_credentials": 401,
    "pin_mismatch": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "email_taken": 409,
    "number_limit_reached": 409,
    "rate_limited": 429,
    "pin_locked": 429,
    "no_numbers_available": 503,
    "database_unavailable": 503,
}


def test_the_registry_keeps_every_status_and_code_of_the_design():
    registry = {code.value: code.status for code in ErrorCode}
    assert {name: registry.get(name) for name in DESIGN_5_2} == DESIGN_5_2


def test_docs_list_exactly_the_registry():
    text = (settings.BASE_DIR / "docs" / "errors.md").read_text()
    documented = dict(re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", text, flags=re.MULTILINE))
    assert documented == {code.value: str(code.status) for code in ErrorCode}


@pytest.mark.django_db
def test_the_schema_enumerates_the_registry(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    components = response.json()["components"]["schemas"]
    code = components["Error"]["properties"]["code"]
    if "allOf" in code:
        code = code["allOf"][0]
    enum = code.get("enum") or components[code["$ref"].split("/")[-1]]["enum"]
    assert sorted(enum) == sorted(code.value for code in ErrorCode)


def test_a_code_outside_the_registry_cannot_be_raised():
    with pytest.raises(ValueError):
        ApplicationError("no such code", code="made_up_code")
    assert ApplicationError("x", code=ErrorCode.PIN_LOCKED).status == 429
