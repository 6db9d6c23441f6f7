"""OpenAPI helpers: every operation is documented through `operation()`, which gives it a
summary, examples and every error status it can answer, each status with exactly the registry
codes (core/errors.py) that can occur there.

Use it on every ViewSet action:

    @operation(
        "numbers_greeting_set",
        summary="Set a number's greeting",
        request=(GreetingInput, {"text": "Hello"}),
        responses={200: (NumberOutput, NUMBER_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )

The errors every operation shares are added by `operation()` itself (`implied_codes`), so an
endpoint added later documents them without thinking of them; tests/relay/test_schema_truth.py
walks every operation and fails on one that does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiRequest,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers

from core.errors import ErrorCode
from core.fields import SuccessField

# Codes whose responses carry `Retry-After` (seconds): the rate limits and locks, and the
# 503s a client should simply retry.
RETRY_AFTER_CODES = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.QUOTA_EXCEEDED,
        ErrorCode.PIN_LOCKED,
        ErrorCode.DATABASE_UNAVAILABLE,
        ErrorCode.SERVICE_UNAVAILABLE,
        ErrorCode.MATRIX_UNAVAILABLE,
    }
)

# Codes whose 429 also carries the quota (core.errors.RateLimited).
QUOTA_CODES = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.QUOTA_EXCEEDED, ErrorCode.PIN_LOCKED})
QUOTA_HEADERS = {
    "X-RateLimit-Limit": {
        "description": "Attempts allowed per window; for quota_exceeded, the plan's limit of "
        "the quota used up (calls a day, answered seconds a day, or calls at once).",
        "schema": {"type": "integer", "minimum": 0},
    },
    "X-RateLimit-Remaining": {
        "description": "Attempts left in this window: 0 on a 429.",
        "schema": {"type": "integer", "minimum": 0},
    },
    "X-RateLimit-Reset": {
        "description": "When attempts are allowed again, in seconds since the Unix epoch.",
        "schema": {"type": "integer"},
    },
}

# A response schema component per set of codes, named after them (CallNotCancelableError,
# NotAuthenticatedOrAuthenticationFailedError), filled by error_responses() and written into
# the schema by `postprocess`. The name is a function of the codes, so two operations that
# answer the same codes share one component.
_ERROR_COMPONENTS: dict[str, tuple[ErrorCode, ...]] = {}

UUID_PATH_SCHEMA = {"type": "string", "format": "uuid"}


def uuid_path_parameter(name: str, *, description: str) -> OpenApiParameter:
    """A path parameter that is a UUID (an id of Relay's), for an action whose path holds one
    besides the ViewSet's own lookup (which core.viewsets documents)."""
    return OpenApiParameter(name, UUID_PATH_SCHEMA, OpenApiParameter.PATH, description=description)


# The Range header of a file download (core.downloads), as every such operation documents it.
RANGE_PARAMETER = OpenApiParameter(
    "Range",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="One byte range, e.g. `bytes=0-` or `bytes=1000-1999` (RFC 9110 §14.2).",
)


# What a WAV download (a voicemail, a greeting, a call's recording) answers and says.
WAV_RESPONSES = {
    (200, "audio/wav"): (OpenApiTypes.BINARY, None),
    (206, "audio/wav"): (OpenApiTypes.BINARY, None),
}
WAV_RANGES = (
    "A `Range` of one byte range is answered with 206 and `Content-Range` (`Accept-Ranges: "
    "bytes`), one starting past the end with 416. Errors are JSON whatever the Accept header "
    "asks for."
)


def wav_download_operation(
    operation_id: str, *, summary: str, description: str, parameters=(), errors=()
):
    """`operation()` of a WAV file download: `description` says whose file and when it is
    404; the byte ranges, the responses and their errors are the same for every one (and
    `errors` besides, e.g. a member's 403)."""
    return operation(
        operation_id,
        summary=summary,
        description=f"{description} {WAV_RANGES}",
        responses=WAV_RESPONSES,
        parameters=[RANGE_PARAMETER, *parameters],
        errors=[ErrorCode.NOT_FOUND, ErrorCode.RANGE_NOT_SATISFIABLE, *errors],
    )


def implied_codes(
    *, authenticated: bool, reads_body: bool, answers_json: bool = True
) -> list[ErrorCode]:
    """The codes any operation of that kind can answer, whatever it does:
    - 406 when the client accepts no JSON (DRF's content negotiation, before anything else),
      for an operation that answers JSON; one that answers a file (a recording's audio) sends
      it whatever Accept says, and its errors in JSON;
    - 413 when the declared body is over API_MAX_BODY_BYTES (relay.middleware checks every
      /api/ request, whether or not the operation reads a body);
    - 503 when the database cannot be reached (relay.middleware, on every path);
    - 401 when authentication is required;
    - 400 and 415 when the operation parses a JSON body."""
    codes = [ErrorCode.PAYLOAD_TOO_LARGE, ErrorCode.DATABASE_UNAVAILABLE]
    if answers_json:
        codes.append(ErrorCode.NOT_ACCEPTABLE)
    if authenticated:
        codes += [ErrorCode.NOT_AUTHENTICATED, ErrorCode.AUTHENTICATION_FAILED]
    if reads_body:
        codes += [ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_MEDIA_TYPE]
    return codes


def _pascal(code: ErrorCode) -> str:
    return "".join(part.capitalize() for part in code.value.split("_"))


def error_component_name(codes: Iterable[ErrorCode]) -> str:
    return "Or".join(_pascal(code) for code in _registry_order(codes)) + "Error"


def _registry_order(codes: Iterable[ErrorCode]) -> tuple[ErrorCode, ...]:
    wanted = set(codes)
    return tuple(code for code in ErrorCode if code in wanted)


def error_schema(codes: Iterable[ErrorCode] | None = None, *, description: str = "") -> dict:
    """The one error shape, `{"error", "code", "fields"?}`, with `code` limited to `codes`
    (default: the whole registry)."""
    codes = _registry_order(codes if codes is not None else ErrorCode)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "error": {"type": "string", "description": "Message for people; it may change."},
            "code": {
                "type": "string",
                "enum": [code.value for code in codes],
                "description": "Stable machine-readable code (docs/errors.md).",
            },
            "fields": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
                "description": "Per-field messages (validation errors only).",
            },
        },
        "required": ["error", "code"],
    }
    if description:
        schema["description"] = description
    return schema


def _example_body(code: ErrorCode) -> dict:
    body: dict[str, Any] = {"error": code.meaning, "code": code.value}
    if code == ErrorCode.INVALID_REQUEST:
        body = {
            "error": "alias: This field is required.",
            "code": code.value,
            "fields": {"alias": ["This field is required."]},
        }
    return body


def _description(codes: Iterable[ErrorCode]) -> str:
    """The codes, each with its meaning (the registry's words)."""
    return "\n".join(f"- `{code.value}`: {code.meaning}" for code in codes)


def error_responses(codes: Iterable[ErrorCode]) -> dict[tuple[int, str], OpenApiResponse]:
    """The error responses for `codes`, one per status: a component whose `code` enum is
    exactly the codes of that status, the codes described, and one example per code."""
    by_status: dict[int, list[ErrorCode]] = {}
    for code in _registry_order(codes):
        by_status.setdefault(code.status, []).append(code)
    responses = {}
    for status, group in sorted(by_status.items()):
        name = error_component_name(group)
        _ERROR_COMPONENTS[name] = tuple(group)
        # JSON whatever the operation's renderers (an audio download's errors are JSON too).
        responses[status, "application/json"] = OpenApiResponse(
            response={"$ref": f"#/components/schemas/{name}"},
            description=_description(group),
            examples=[
                OpenApiExample(code.value, value=_example_body(code), status_codes=[status])
                for code in group
            ],
        )
    return responses


def errors(*statuses: int) -> dict[tuple[int, str], OpenApiResponse]:
    """Every registry code of each status (for a status whose codes cannot be told apart).
    Prefer listing the codes through operation(errors=...)."""
    return error_responses(code for code in ErrorCode if code.status in statuses)


def _example(name: str, value: Any, status: int | None = None) -> OpenApiExample:
    return OpenApiExample(name, value=value, status_codes=[status] if status else None)


def operation(
    operation_id: str,
    *,
    summary: str,
    responses: Mapping[int | tuple[int, str], tuple[Any, Any]],
    request: tuple[Any, Any] | None = None,
    errors: Iterable[ErrorCode] = (),
    authenticated: bool = True,
    description: str | None = None,
    parameters: list | None = None,
):
    """`@extend_schema` for one operation, documented whole:

    - `summary`: one line;
    - `request`: `(serializer, example body)` when the operation reads a JSON body;
    - `responses`: `{status: (serializer, example body)}` for its successes, JSON; a body
      of another type is keyed `(status, media type)`, e.g.
      `{(200, "audio/wav"): (OpenApiTypes.BINARY, None)}` (no example for binary bodies);
    - `errors`: the codes this operation raises itself; those every such operation can
      answer (implied_codes) are added, and all are grouped by status.
    """
    answers_json = all(
        not isinstance(key, tuple) or key[1:] == ("application/json",) for key in responses
    )
    codes = [
        *errors,
        *implied_codes(
            authenticated=authenticated, reads_body=request is not None, answers_json=answers_json
        ),
    ]
    documented: dict[Any, Any] = {}
    for key, (serializer, example) in responses.items():
        status = key[0] if isinstance(key, tuple) else key
        phrase = HTTPStatus(status).phrase
        examples = [] if example is None else [_example(phrase, example, status)]
        documented[key] = OpenApiResponse(serializer, description=phrase, examples=examples)
    documented.update(error_responses(codes))
    kwargs: dict[str, Any] = {
        "operation_id": operation_id,
        "summary": summary,
        "responses": documented,
        "request": None,
    }
    if request is not None:
        serializer, example = request
        kwargs["request"] = OpenApiRequest(serializer, examples=[_example("request", example)])
    if description:
        kwargs["description"] = description
    if parameters:
        kwargs["parameters"] = parameters
    if not authenticated:
        kwargs["auth"] = []
    return extend_schema(**kwargs)


# `{"success": true}`: the body of an operation that has nothing else to return. (A comment:
# drf-spectacular would publish a docstring as the component's description.)
class SuccessOutput(serializers.Serializer):
    success = SuccessField()


SUCCESS_EXAMPLE = {"success": True}


def success_operation(operation_id: str, **kwargs):
    """`operation()` for an action that has nothing to return but `{"success": true}` (its
    answer: ResourceViewSet.succeeded)."""
    return operation(operation_id, responses={200: (SuccessOutput, SUCCESS_EXAMPLE)}, **kwargs)


def postprocess(result: dict, generator, request=None, public=True, **kwargs) -> dict:
    """drf-spectacular POSTPROCESSING_HOOKS entry (after its enum hook, which would otherwise
    pull every `code` enum out into a component of its own): writes the error components
    the operations refer to, the general `Error`, and `Retry-After` on the responses whose
    codes carry it."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = error_schema(
        description="The one error shape. Each operation's error responses name the codes "
        "that can occur there; docs/errors.md lists them all."
    )
    for operations in result.get("paths", {}).values():
        for operation_ in operations.values():
            for response in operation_.get("responses", {}).values():
                ref = response.get("content", {}).get("application/json", {}).get("schema", {})
                name = ref.get("$ref", "").rsplit("/", 1)[-1]
                if name not in _ERROR_COMPONENTS:
                    continue
                codes = _ERROR_COMPONENTS[name]
                schemas[name] = error_schema(codes)
                retrying = [code in RETRY_AFTER_CODES for code in codes]
                if any(retrying):
                    response.setdefault("headers", {})["Retry-After"] = {
                        "description": "Seconds to wait before trying again.",
                        "required": all(retrying),
                        "schema": {"type": "integer", "minimum": 1},
                    }
                if QUOTA_CODES.intersection(codes):
                    response.setdefault("headers", {}).update(QUOTA_HEADERS)
    return result
