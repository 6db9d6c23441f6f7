import pytest

from core.errors import ErrorCode
from tests.interface import DASHBOARD_FIELDS, ME_FIELDS

ACCOUNT_PATHS = {
    "/api/auth/register": {"post"},
    "/api/auth/login": {"post"},
    "/api/auth/logout": {"post"},
    "/api/user/me": {"get"},
    "/api/user/matrix": {"put"},
    "/api/user/notifications": {"put"},
    "/api/user/regenerate-api-key": {"post"},
    "/api/user/2fa": {"post", "delete"},
    "/api/user/2fa/confirm": {"post"},
    "/api/user/sessions/{session_id}": {"delete"},
    "/api/dashboard": {"get"},
    "/api/captcha": {"get"},
    "/api/captcha/verify": {"post"},
    "/api/numbers": {"get", "post"},
    "/api/numbers/{number_id}": {"delete"},
    "/api/numbers/{number_id}/alias": {"put"},
    "/api/numbers/{number_id}/pin": {"put"},
    "/api/numbers/{number_id}/blocked": {"get", "post", "delete"},
    "/api/history": {"get"},
    "/api/calls": {"get", "post"},
    "/api/calls/{call_id}": {"get"},
    "/api/calls/{call_id}/cancel": {"post"},
}


def test_schema_documents_every_operation(schema):
    for path, methods in ACCOUNT_PATHS.items():
        assert path in schema["paths"], path
        assert methods <= set(schema["paths"][path]), path


def test_every_operation_documents_its_errors_with_the_error_shape(schema):
    components = schema["components"]["schemas"]
    shape = components["Error"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            error_codes = [c for c in operation["responses"] if c.startswith(("4", "5"))]
            assert error_codes, f"{method} {path} documents no error"
            for status in error_codes:
                ref = operation["responses"][status]["content"]["application/json"]["schema"]
                error = components[ref["$ref"].split("/")[-1]]
                # The one shape, its code narrowed to registry codes of this very status.
                assert set(error["properties"]) == set(shape["properties"]), (method, path)
                assert error["required"] == shape["required"] == ["error", "code"]
                statuses = {ErrorCode(code).status for code in error["properties"]["code"]["enum"]}
                assert statuses == {int(status)}, (method, path, status)


def test_authenticated_operations_accept_both_schemes(schema):
    me = schema["paths"]["/api/user/me"]["get"]
    assert {"bearerAuth": []} in me["security"]
    assert {"apiKeyAuth": []} in me["security"]
    register = schema["paths"]["/api/auth/register"]["post"]
    assert not register.get("security")


def test_response_fields_are_spelled_as_the_interface_says(schema):
    components = schema["components"]["schemas"]
    assert set(components["MeOutput"]["properties"]) == ME_FIELDS
    assert set(components["DashboardOutput"]["properties"]) == DASHBOARD_FIELDS
    assert components["MeOutput"]["properties"]["createdAt"]["type"] == "integer"


@pytest.mark.django_db
def test_swagger_ui_is_served_with_offline_assets(client):
    page = client.get("/api/docs")
    assert page.status_code == 200
    assert b"swagger-ui" in page.content
    assert b"cdn.jsdelivr" not in page.content
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200


@pytest.mark.parametrize(
    ("path", "output"), [("/api/history", "HistoryOutput"), ("/api/calls", "CallListOutput")]
)
def test_the_lists_document_before_and_next_cursor(schema, path, output):
    parameters = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
    before = parameters["before"]
    assert before["in"] == "query" and not before.get("required")
    assert before["schema"] == {
        "type": "string",
        "pattern": "^[A-Za-z0-9_-]{32}$",
        "minLength": 32,
        "maxLength": 32,
    }
    assert "nextCursor" in before["description"]
    component = schema["components"]["schemas"][output]
    assert component["properties"]["nextCursor"]["type"] == "string"
    assert component["properties"]["nextCursor"]["nullable"] is True
    assert "nextCursor" in component["required"]
