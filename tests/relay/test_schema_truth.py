"""The schema tells the truth (issue 17): every operation, present and future, has a summary,
examples, and every status it can answer with exactly the codes possible there; the schema
validates; its version is the package's; the WebSocket protocol is in its description."""

import importlib.metadata
import re
import tomllib

import pytest
from django.conf import settings
from django.urls import include
from django.urls import path as route
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.types import OpenApiTypes
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate
from rest_framework.decorators import action

from core import schema as openapi
from core.errors import ErrorCode
from core.schema import RETRY_AFTER_CODES
from core.viewsets import ResourceViewSet, Router

# Path ids that are not UUIDs: a call's id is the client's own string.
NON_UUID_PATH_IDS = {"call_id", "token"}  # an invitation's token (issue 57)
# The operations that answer 429, and with which codes: rate limits and the PIN lock.
RATE_LIMITED = {
    "auth_register": {"rate_limited"},
    "auth_login": {"rate_limited"},
    "auth_password_reset": {"rate_limited"},
    "auth_password_reset_confirm": {"rate_limited"},
    "user_password_change": {"rate_limited"},
    "captcha_issue": {"rate_limited"},
    "captcha_verify": {"rate_limited"},
    "calls_submit": {"rate_limited", "quota_exceeded"},
    "calls_transfer": {"rate_limited"},
    "numbers_pin_change": {"pin_locked"},
    "numbers_forwarding_set": {"rate_limited"},
    "numbers_hold_music_set": {"rate_limited"},
    "numbers_hours_set": {"rate_limited"},
    "numbers_ringing_set": {"rate_limited"},
    "user_ring_phone_set": {"rate_limited"},
    "numbers_members_invite": {"rate_limited"},
    "user_matrix_set": {"rate_limited"},
    "user_delete": {"rate_limited"},
    "user_export": {"rate_limited"},
    "user_two_factor_start": {"rate_limited"},
    "user_two_factor_confirm": {"rate_limited"},
    "user_two_factor_disable": {"rate_limited"},
    "auth_verify_email": {"rate_limited"},
    "user_email_verification_resend": {"rate_limited"},
    "user_email_change": {"rate_limited"},
}


def operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def codes(schema, operation, status: int) -> set[str]:
    response = operation["responses"][str(status)]
    name = response["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    return set(schema["components"]["schemas"][name]["properties"]["code"]["enum"])


def test_the_schema_is_valid_openapi(schema):
    validate(schema)


def test_every_operationhas_a_summary_and_examples(schema):
    for name, operation in operations(schema):
        assert operation.get("summary", "").strip(), f"{name} has no summary"
        if "requestBody" in operation:
            [(media_type, body)] = operation["requestBody"]["content"].items()
            # A binary body (a number's music on hold, audio/wav) has a schema and no example.
            assert body["schema"], f"{name}: no request schema"
            if media_type == "application/json":
                assert body.get("examples"), f"{name}: no request example"
        for status, response in operation["responses"].items():
            for media_type, body in response.get("content", {}).items():  # 204: none
                # A binary body (audio) has a schema and no example; JSON has both.
                assert body["schema"], f"{name} {status} {media_type}: no schema"
                if media_type == "application/json":
                    assert body.get("examples"), f"{name} {status}: no example"
            if status.startswith(("4", "5")):
                assert list(response["content"]) == ["application/json"], f"{name} {status}"
                content = response["content"]["application/json"]
                shown = {example["value"]["code"] for example in content["examples"].values()}
                assert shown == codes(schema, operation, int(status)), f"{name} {status}"


def test_every_operationlists_the_statuses_every_request_can_get(schema):
    for name, operation in operations(schema):
        # The body-size and database middleware: on every path. Content negotiation: on every
        # operation that answers JSON (a file download sends its file whatever Accept says).
        successes = [r for s, r in operation["responses"].items() if s.startswith("2")]
        if all(set(r.get("content", {})) <= {"application/json"} for r in successes):
            assert codes(schema, operation, 406) == {"not_acceptable"}, name
        assert codes(schema, operation, 413) == {"payload_too_large"}, name
        assert "database_unavailable" in codes(schema, operation, 503), name
        if operation.get("security"):
            assert codes(schema, operation, 401) >= {
                "not_authenticated",
                "authentication_failed",
            }, name
        if "requestBody" in operation:
            assert "invalid_request" in codes(schema, operation, 400), name
            assert codes(schema, operation, 415) == {"unsupported_media_type"}, name


def test_429_and_retryable_503_carry_retry_after(schema):
    limited = {}
    for name, operation in operations(schema):
        for status, response in operation["responses"].items():
            if not status.startswith(("4", "5")):
                continue
            here = {ErrorCode(code) for code in codes(schema, operation, int(status))}
            header = response.get("headers", {}).get("Retry-After")
            if here & RETRY_AFTER_CODES:
                assert header["schema"]["type"] == "integer", (name, status)
                assert header["required"] == (here <= RETRY_AFTER_CODES), (name, status)
            else:
                assert header is None, (name, status)
        if "429" in operation["responses"]:
            assert operation["responses"]["429"]["headers"]["Retry-After"]["required"]
            limited[operation["operationId"]] = codes(schema, operation, 429)
    assert limited == RATE_LIMITED


def test_path_ids_are_uuids(schema):
    for name, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "path" or parameter["name"] in NON_UUID_PATH_IDS:
                continue
            assert parameter["schema"] == {"type": "string", "format": "uuid"}, name


def test_the_codes_named_in_issue_17_are_the_ones_documented(schema):
    paths = schema["paths"]
    verify = paths["/api/captcha/verify"]["post"]
    assert codes(schema, verify, 400) == {
        "invalid_request",
        "captcha_wrong_answer",
        "captcha_invalid",
    }
    cancel = paths["/api/calls/{call_id}/cancel"]["post"]
    assert codes(schema, cancel, 409) == {"call_not_cancelable"}
    create = paths["/api/numbers"]["post"]
    assert codes(schema, create, 409) == {"number_limit_reached"}
    assert codes(schema, create, 503) == {
        "no_numbers_available",
        "service_unavailable",
        "database_unavailable",
    }


def test_unblocking_declares_the_body_the_server_reads(schema):
    unblock = schema["paths"]["/api/numbers/{number_id}/blocked"]["delete"]
    assert unblock["requestBody"]["required"] is True
    ref = unblock["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.split("/")[-1]]
    assert body["required"] == ["caller_num"]


def test_every_example_fits_its_schema(schema):
    components = {"components": schema["components"]}

    def check(name, content):
        validator = OAS30Validator({**components, **content["schema"]})
        for example in content["examples"].values():
            errors = [e.message for e in validator.iter_errors(example["value"])]
            assert not errors, (name, example["value"], errors)

    for name, operation in operations(schema):
        if "application/json" in operation.get("requestBody", {}).get("content", {}):
            check(name, operation["requestBody"]["content"]["application/json"])
        for status, response in operation["responses"].items():
            if "application/json" in response.get("content", {}):
                check(f"{name} {status}", response["content"]["application/json"])


def test_one_version_the_packages_and_a_server(schema):
    pyproject = tomllib.loads((settings.BASE_DIR / "pyproject.toml").read_text())
    assert schema["info"]["version"] == importlib.metadata.version("relay")
    assert schema["info"]["version"] == pyproject["project"]["version"]
    assert schema["servers"] == [{"url": "/", "description": "The Relay serving this document"}]


def test_the_description_carries_the_websocket_protocol(schema):
    description = schema["info"]["description"]
    protocol = (settings.BASE_DIR / "docs" / "websocket.md").read_text()
    close_codes = re.findall(r"^\| (\d{4}) \|", protocol, flags=re.MULTILINE)
    assert close_codes  # the table of docs/websocket.md
    for code in close_codes:
        assert code in description, code
    frame_types = set(re.findall(r'"type": "([a-z_]+)"', protocol))
    assert {"ping", "pong", "call", "call_ack", "call_status", "call_record", "error"} <= (
        frame_types
    )
    for frame in frame_types:
        assert f'"type": "{frame}"' in description or f"`{frame}`" in description, frame
    assert "/ws?token=" in description


@pytest.mark.django_db
def test_swagger_ui_shows_the_description_with_the_websocket_protocol(client):
    page = client.get("/api/docs")
    assert page.status_code == 200
    # Swagger UI renders the schema it is pointed at, its description (the protocol) first.
    assert b'url: "/api/schema"' in page.content


class FileViewSet(ResourceViewSet):
    # A made-up resource answering a file, documented as a later endpoint would be.

    lookup_url_kwarg = "record_id"

    @openapi.operation(
        "file_get",
        summary="Download a file",
        responses={(200, "audio/wav"): (OpenApiTypes.BINARY, None)},
        errors=[ErrorCode.NOT_FOUND],
    )
    @action(detail=True, methods=["get"])
    def file(self, request, record_id):
        raise NotImplementedError


def test_the_helper_documents_a_file_download_as_a_later_endpoint_would_be():
    router = Router()
    router.register("files", FileViewSet, basename="file")
    generated = SchemaGenerator(patterns=[route("api/", include(router.urls))]).get_schema(
        request=None, public=True
    )
    validate(generated)
    operation = generated["paths"]["/api/files/{record_id}/file"]["get"]
    assert operation["summary"] == "Download a file"
    ok = operation["responses"]["200"]["content"]
    assert list(ok) == ["audio/wav"] and "examples" not in ok["audio/wav"]
    assert sorted(operation["responses"]) == ["200", "401", "404", "413", "503"]  # no 406
    assert codes(generated, operation, 404) == {"not_found"}
    assert codes(generated, operation, 503) == {"database_unavailable"}
    assert operation["parameters"][0]["schema"] == {"type": "string", "format": "uuid"}
