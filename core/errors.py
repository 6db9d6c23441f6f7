"""One error shape for the whole API: {"error": <for people>, "code": <stable>, "fields"?: {...}}.

Services raise ApplicationError (or a subclass); DRF's own exceptions are translated here, so
views never build an error body by hand. The WebSocket error frame reuses the same codes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApplicationError(Exception):
    """A failure a client can act on. Rendered as JSON with `status` by the exception handler."""

    status = 400
    code = "invalid_request"
    message = "The request is invalid."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        status: int | None = None,
        fields: Mapping[str, list[str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.message = message or self.message
        self.code = code or self.code
        self.status = status or self.status
        self.fields = dict(fields) if fields else None
        self.headers = dict(headers) if headers else {}
        super().__init__(self.message)

    def as_body(self) -> dict:
        body: dict = {"error": self.message, "code": self.code}
        if self.fields:
            body["fields"] = self.fields
        return body


class InvalidRequest(ApplicationError):
    status, code = 400, "invalid_request"


class NotFound(ApplicationError):
    status, code, message = 404, "not_found", "Not found."


class Conflict(ApplicationError):
    status = 409


class RateLimited(ApplicationError):
    status, code, message = 429, "rate_limited", "Too many requests. Try again later."

    def __init__(self, retry_after: int, message: str | None = None, *, code: str | None = None):
        retry_after = max(1, int(retry_after))
        super().__init__(message, code=code, headers={"Retry-After": str(retry_after)})
        self.retry_after = retry_after


class ServiceUnavailable(ApplicationError):
    status = 503


def flatten_field_errors(detail) -> dict[str, list[str]]:
    """DRF's nested error detail as {"field": ["message", ...]}; nested fields joined by dots."""
    out: dict[str, list[str]] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, Mapping):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping | list):
                    walk(prefix, item)
                else:
                    out.setdefault(prefix or "non_field_errors", []).append(str(item))
        else:
            out.setdefault(prefix or "non_field_errors", []).append(str(value))

    walk("", detail)
    return out


def _summary(fields: dict[str, list[str]]) -> str:
    name, messages = next(iter(fields.items()))
    if name == "non_field_errors":
        return messages[0]
    return f"{name}: {messages[0]}"


def to_application_error(exc: Exception) -> ApplicationError | None:
    """Translate a DRF or Django exception into our error; None for anything unexpected."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, drf.ValidationError):
        fields = flatten_field_errors(exc.detail)
        return InvalidRequest(_summary(fields) if fields else None, fields=fields)
    if isinstance(exc, drf.ParseError):
        return InvalidRequest("The request body is not valid JSON.")
    if isinstance(exc, drf.UnsupportedMediaType):
        return ApplicationError(
            "Send the body as JSON (Content-Type: application/json).",
            code="unsupported_media_type",
            status=415,
        )
    if isinstance(exc, drf.NotAuthenticated):
        return ApplicationError(
            "Authentication credentials were not provided.", code="not_authenticated", status=401
        )
    if isinstance(exc, drf.AuthenticationFailed):
        # simplejwt puts token internals in detail; the client only needs to know it failed.
        message = exc.detail if isinstance(exc.detail, str) else "Invalid or expired token."
        return ApplicationError(str(message), code="authentication_failed", status=401)
    if isinstance(exc, (drf.PermissionDenied, DjangoPermissionDenied)):
        return ApplicationError(
            "You do not have permission to do this.", code="permission_denied", status=403
        )
    if isinstance(exc, (drf.NotFound, Http404)):
        return NotFound()
    if isinstance(exc, drf.MethodNotAllowed):
        return ApplicationError(str(exc.detail), code="method_not_allowed", status=405)
    if isinstance(exc, drf.NotAcceptable):
        return ApplicationError("This API only produces JSON.", code="not_acceptable", status=406)
    if isinstance(exc, drf.Throttled):
        return RateLimited(int(exc.wait or 1))
    return None


def exception_handler(exc: Exception, context) -> Response | None:
    """DRF EXCEPTION_HANDLER: every error leaves as our JSON shape."""
    error = to_application_error(exc)
    if error is None:
        return None  # a bug: Django logs it and handler500 answers with JSON
    headers = dict(error.headers)
    if error.status == 401:
        # RFC 7235: a 401 names the scheme that would have worked.
        headers.setdefault("WWW-Authenticate", 'Bearer realm="api"')
    return Response(error.as_body(), status=error.status, headers=headers)


def json_error(message: str, code: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message, "code": code}, status=status)


def handler400(request, exception=None):
    return json_error("Bad request.", "invalid_request", 400)


def handler403(request, exception=None):
    return json_error("You do not have permission to do this.", "permission_denied", 403)


def handler404(request, exception=None):
    return json_error("Not found.", "not_found", 404)


def handler500(request):
    return json_error("Internal server error.", "server_error", 500)
