"""One error shape for the whole API: {"error": <for people>, "code": <stable>, "fields"?: {...}}.

Services raise ApplicationError (or a subclass); DRF's own exceptions are translated here, so
views never build an error body by hand. The WebSocket error frame reuses the same codes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from enum import StrEnum

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ErrorCode(StrEnum):
    """Every code the API answers with, over HTTP and on the socket: its HTTP status and what
    it means. A code outside this registry cannot be raised; docs/errors.md and the schema's
    `code` enum are generated from the same list and checked against it."""

    def __new__(cls, value: str, status: int, meaning: str):
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.meaning = meaning
        return member

    INVALID_REQUEST = (
        "invalid_request",
        400,
        "Malformed JSON, a missing or wrong-typed field, or a bad value.",
    )
    CAPTCHA_WRONG_ANSWER = ("captcha_wrong_answer", 400, "The CAPTCHA answer is wrong.")
    CAPTCHA_INVALID = (
        "captcha_invalid",
        400,
        "The CAPTCHA challenge or token is unknown, used or expired.",
    )
    BLOCKLIST_FULL = ("blocklist_full", 400, "The number already blocks as many callers as it may.")
    RESET_TOKEN_INVALID = (
        "reset_token_invalid",
        400,
        "The password reset link is unknown, used, older than 30 minutes, or outdated by a "
        "change of password.",
    )
    DESTINATION_NOT_ALLOWED = (
        "destination_not_allowed",
        400,
        "The dialing policy refuses the number: a country outside DIAL_ALLOWED_COUNTRIES, or a "
        "premium-rate, shared-cost, UAN, personal or pager number.",
    )
    VERIFICATION_INVALID = (
        "verification_invalid",
        400,
        "The e-mail verification link is unknown, used, expired, or outdated by a change of "
        "address.",
    )
    MEMBER_EXISTS = (
        "member_exists",
        400,
        "The address is already a member of the number, or invited to it.",
    )
    MEMBER_IS_OWNER = ("member_is_owner", 400, "The number's owner cannot be its member.")
    MEMBERS_FULL = (
        "members_full",
        400,
        "The number already has as many members and invitations as it may (20).",
    )
    INVITATION_INVALID = (
        "invitation_invalid",
        400,
        "The invitation link is unknown, used, expired or revoked.",
    )
    NOT_AUTHENTICATED = ("not_authenticated", 401, "No credentials were sent.")
    AUTHENTICATION_FAILED = (
        "authentication_failed",
        401,
        "A bad or expired JWT, an ended session, or an unknown or replaced API key.",
    )
    INVALID_CREDENTIALS = ("invalid_credentials", 401, "Wrong e-mail or password.")
    OTP_REQUIRED = (
        "otp_required",
        401,
        "The account has a second factor: send `otp`, a code of its authenticator app or a "
        "recovery code.",
    )
    OTP_INVALID = (
        "otp_invalid",
        401,
        "The second factor's code is wrong or already used, or the recovery code is used.",
    )
    PIN_MISMATCH = ("pin_mismatch", 403, "The current PIN is wrong.")
    PASSWORD_MISMATCH = ("password_mismatch", 403, "The current password is wrong.")
    PERMISSION_DENIED = ("permission_denied", 403, "Not allowed.")
    INVITATION_EMAIL_MISMATCH = (
        "invitation_email_mismatch",
        403,
        "The invitation was sent to another address than the signed-in account's.",
    )
    REGISTRATION_CLOSED = (
        "registration_closed",
        403,
        "Sign-up is closed (REGISTRATION_OPEN=false): staff create accounts.",
    )
    EMAIL_UNVERIFIED = (
        "email_unverified",
        403,
        "REQUIRE_EMAIL_VERIFICATION is on and the account's address is not verified yet: "
        "follow the link mailed to it (or ask for it again).",
    )
    NOT_FOUND = ("not_found", 404, "The id is unknown or not the caller's (never saying which).")
    METHOD_NOT_ALLOWED = ("method_not_allowed", 405, "The path does not take this method.")
    NOT_ACCEPTABLE = ("not_acceptable", 406, "The API only produces JSON.")
    EMAIL_TAKEN = ("email_taken", 409, "The e-mail address is already registered.")
    NUMBER_LIMIT_REACHED = ("number_limit_reached", 409, "The plan's numbers are all held.")
    CALL_NOT_CANCELABLE = ("call_not_cancelable", 409, "The call has already ended.")
    CALL_NOT_TRANSFERABLE = (
        "call_not_transferable",
        409,
        "The call is not in progress bridged to one of its number's phones or tabs.",
    )
    NO_CONSULT = (
        "no_consult",
        409,
        "No consultation (attended transfer) of this tab's is under way on the call.",
    )
    CONSULT_NOT_ANSWERED = (
        "consult_not_answered",
        409,
        "The consultation's target has not answered yet: only Cancel is possible now.",
    )
    TWO_FACTOR_ON = (
        "two_factor_on",
        409,
        "A second factor is already on: turn it off first.",
    )
    TWO_FACTOR_OFF = (
        "two_factor_off",
        409,
        "No second factor is on (to confirm: none was started).",
    )
    EMAIL_ALREADY_VERIFIED = (
        "email_already_verified",
        409,
        "The address is verified and no change of address is pending: nothing to send.",
    )
    PAYLOAD_TOO_LARGE = (
        "payload_too_large",
        413,
        "The body is larger than API_MAX_BODY_BYTES (a number's music on hold: "
        "HOLD_MUSIC_MAX_BYTES).",
    )
    URI_TOO_LONG = ("uri_too_long", 414, "The request line is over 16 KiB.")
    UNSUPPORTED_MEDIA_TYPE = (
        "unsupported_media_type",
        415,
        "The body is not JSON (a number's music on hold: not audio/wav).",
    )
    RANGE_NOT_SATISFIABLE = (
        "range_not_satisfiable",
        416,
        "A download's Range starts past the end of the file; Content-Range gives its size.",
    )
    RATE_LIMITED = ("rate_limited", 429, "Too many attempts; see Retry-After.")
    PIN_LOCKED = (
        "pin_locked",
        429,
        "Five wrong PINs in 15 minutes: PIN changes are locked; see Retry-After.",
    )
    QUOTA_EXCEEDED = (
        "quota_exceeded",
        429,
        "A quota of the plan is used up (calls or answered seconds per day, calls at once); "
        "see Retry-After.",
    )
    HEADER_TOO_LARGE = ("header_too_large", 431, "A request header is over 16 KiB.")
    SERVER_ERROR = ("server_error", 500, "A bug in Relay (logged).")
    NO_NUMBERS_AVAILABLE = ("no_numbers_available", 503, "The number inventory is empty.")
    SERVICE_UNAVAILABLE = (
        "service_unavailable",
        503,
        "The server could not take the request now (it is stopping or overloaded); try again.",
    )
    MATRIX_UNAVAILABLE = (
        "matrix_unavailable",
        503,
        "The Matrix homeserver could not be asked whether the Matrix id exists; try again.",
    )
    DATABASE_UNAVAILABLE = (
        "database_unavailable",
        503,
        "The database cannot be reached; see Retry-After.",
    )


class ApplicationError(Exception):
    """A failure a client can act on: a code from the registry (which gives the status by
    default), a message for people, and optionally per-field messages and headers."""

    code = ErrorCode.INVALID_REQUEST
    message = "The request is invalid."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: ErrorCode | None = None,
        status: int | None = None,
        fields: Mapping[str, list[str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.message = message or self.message
        self.code = ErrorCode(code or self.code)
        self.status = status or self.code.status
        self.fields = dict(fields) if fields else None
        self.headers = dict(headers) if headers else {}
        super().__init__(self.message)

    def as_body(self) -> dict:
        body: dict = {"error": self.message, "code": self.code.value}
        if self.fields:
            body["fields"] = self.fields
        return body

    def as_response(self) -> JsonResponse:
        """The error as a plain Django response, for code that runs outside DRF."""
        response = JsonResponse(self.as_body(), status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


class InvalidRequest(ApplicationError):
    code = ErrorCode.INVALID_REQUEST


class NotFound(ApplicationError):
    code, message = ErrorCode.NOT_FOUND, "Not found."


class DatabaseUnavailable(ApplicationError):
    """A 503 while the database cannot be reached (OperationalError, InterfaceError): try
    again in a few seconds."""

    code = ErrorCode.DATABASE_UNAVAILABLE
    message = "The database is unavailable. Try again shortly."
    RETRY_AFTER = 5

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": str(self.RETRY_AFTER)})


class RateLimited(ApplicationError):
    """A 429: `Retry-After` (seconds) and the quota's headers, `X-RateLimit-Limit` (attempts
    per window, when known), `X-RateLimit-Remaining` (0) and `X-RateLimit-Reset` (the Unix
    time, in seconds, at which attempts are allowed again)."""

    code, message = ErrorCode.RATE_LIMITED, "Too many requests. Try again later."

    def __init__(
        self,
        retry_after: int,
        message: str | None = None,
        *,
        code: ErrorCode | None = None,
        limit: int | None = None,
    ):
        retry_after = max(1, int(retry_after))
        headers = {
            "Retry-After": str(retry_after),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(int(time.time()) + retry_after),
        }
        if limit is not None:
            headers["X-RateLimit-Limit"] = str(limit)
        super().__init__(message, code=code, headers=headers)
        self.retry_after = retry_after


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


def invalid_fields(detail) -> InvalidRequest:
    """A serializer's errors as our 400: every bad field named, the first one summarised."""
    fields = flatten_field_errors(detail)
    return InvalidRequest(_summary(fields) if fields else None, fields=fields)


def to_application_error(exc: Exception) -> ApplicationError | None:
    """Translate a DRF or Django exception into our error; None for anything unexpected."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, drf.ValidationError):
        return invalid_fields(exc.detail)
    if isinstance(exc, drf.ParseError):
        return InvalidRequest("The request body is not valid JSON.")
    if isinstance(exc, drf.UnsupportedMediaType):
        return ApplicationError(
            "Send the body as JSON (Content-Type: application/json).",
            code=ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        )
    if isinstance(exc, drf.NotAuthenticated):
        return ApplicationError(
            "Authentication credentials were not provided.", code=ErrorCode.NOT_AUTHENTICATED
        )
    if isinstance(exc, drf.AuthenticationFailed):
        # simplejwt puts token internals in detail; the client only needs to know it failed.
        message = exc.detail if isinstance(exc.detail, str) else "Invalid or expired token."
        return ApplicationError(str(message), code=ErrorCode.AUTHENTICATION_FAILED)
    if isinstance(exc, (drf.PermissionDenied, DjangoPermissionDenied)):
        return ApplicationError(
            "You do not have permission to do this.", code=ErrorCode.PERMISSION_DENIED
        )
    if isinstance(exc, (drf.NotFound, Http404)):
        return NotFound()
    if isinstance(exc, drf.MethodNotAllowed):
        return ApplicationError(str(exc.detail), code=ErrorCode.METHOD_NOT_ALLOWED)
    if isinstance(exc, drf.NotAcceptable):
        return ApplicationError("This API only produces JSON.", code=ErrorCode.NOT_ACCEPTABLE)
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


def handler400(request, exception=None):
    return InvalidRequest("Bad request.").as_response()


def handler403(request, exception=None):
    return ApplicationError(
        "You do not have permission to do this.", code=ErrorCode.PERMISSION_DENIED
    ).as_response()


def handler404(request, exception=None):
    return NotFound().as_response()


def handler500(request):
    return ApplicationError("Internal server error.", code=ErrorCode.SERVER_ERROR).as_response()
