import logging
import re
import time

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.db import InterfaceError, OperationalError
from django.utils.cache import patch_cache_control

from core import metrics, requestid
from core.errors import ApplicationError, DatabaseUnavailable, ErrorCode, InvalidRequest
from relay.logging import wire_form

logger = logging.getLogger("relay.access")
security_logger = logging.getLogger("relay.security")


class RequestIdMiddleware:
    """The request's id, taken from `X-Request-Id` or made (core.requestid), is in every log
    line the request causes and echoed in the response's `X-Request-Id`."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = requestid.accept(request.META.get("HTTP_X_REQUEST_ID"))
        bound = requestid.current.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            requestid.current.reset(bound)
        response["X-Request-Id"] = request_id
        return response


class AccessLogMiddleware:
    """One line per request: method, path (never the query string), status, ms, user id; and
    the request counted and timed for /metrics under its route's name (core.metrics).

    The query string is left out because the WebSocket URL carries a JWT there, headers are
    never logged, and a path argument named `token` (a mailed link's secret, such as a
    password reset's) is logged as `[token]`, so no token, key or password can reach the log
    through this line.

    The method and path are written in their wire form (relay.logging.wire_form): Django
    hands the path over decoded, and a `%0A` in it would otherwise start a forged line, a
    `%1B` reach the terminal that shows the log, a `%00` make the file binary (issue 53).
    A `%` is written as it came, so `%0A` in the line may also be a `%250A` sent.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        elapsed_ms = elapsed * 1000
        match = getattr(request, "resolver_match", None)
        metrics.http_request_observe(
            route=match.view_name if match is not None else "unmatched",
            method=request.method,
            status=response.status_code,
            seconds=elapsed,
        )
        user = getattr(request, "user", None)
        user_id = user.pk if user is not None and user.is_authenticated else "-"
        path = request.path
        secret = match.kwargs.get("token") if match is not None else None
        if secret:
            path = path.replace(secret, "[token]")
        logger.info(
            "%s %s %s %.1fms user=%s",
            wire_form(request.method),
            wire_form(path),
            response.status_code,
            elapsed_ms,
            user_id,
        )
        return response


# Every route whose answer carries a credential (a JWT, an API key, a webhook or TOTP secret,
# recovery codes, a mailed link's token in its URL or form), the user's export or a recording:
# by URL name (`namespace:name` for the console). tests/relay/test_no_store.py requests each
# one for real, and fails on a route whose name says it should be here and is not.
NO_STORE_ROUTES = frozenset(
    {
        # The API: sessions opened (the JWT and the API key), keys and secrets shown.
        "auth-register",
        "auth-login",
        "auth-password-reset-confirm",
        "auth-verify-email",
        "captcha-verify",
        "dashboard-list",
        "user-regenerate-api-key",
        "user-two-factor",
        "user-two-factor-confirm",
        "user-export",
        "webhook",
        "webhook-rotate-secret",
        # Recordings: voicemail, a call's `record` verb, greetings recorded by phone, a
        # number's music on hold, a bridged call's recording.
        "history-recording",
        "call-recording",
        "number-greeting-recording",
        "number-closed-greeting",
        "number-hold-music",
        "recordings-detail",
        # The console: sign-in, mailed links, the pages that show the key, a secret or codes.
        "console:login",
        "console:login_code",
        "console:register",
        "console:password_reset_confirm",
        "console:verify_email",
        "console:invitation",
        "console:account",
        "console:api_key_regenerate",
        "console:api_key_reveal",
        "console:api_key_new",
        "console:webhook",
        "console:webhook_rotate",
        "console:two_factor",
        "console:account_export",
        "console:recording",
        "console:greeting_recording",
        "console:closed_greeting_recording",
        "console:hold_music_file",
        "console:call_recording_file",
        "console:socket_token",
    }
)


class NoStoreMiddleware:
    """`Cache-Control: no-store` on every answer of a route in NO_STORE_ROUTES, whatever its
    status: neither the browser's cache nor a proxy's keeps a token, key, secret, export or
    recording (issue 53). Added to what a view set (a recording's `private`), never replacing
    it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.view_name in NO_STORE_ROUTES:
            patch_cache_control(response, no_store=True)
        return response


class AllowedHostMiddleware:
    """400 JSON for a Host header outside ALLOWED_HOSTS, logged as one WARNING line.

    Left to Django, the first `request.get_host()` raises DisallowedHost deep inside some
    middleware and it is logged at ERROR with a traceback: scanners send wrong Host headers
    all day, which is noise to note, not a server error to investigate.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            request.get_host()
        except DisallowedHost:
            host = request.META.get("HTTP_HOST", "")
            security_logger.warning("refused a request for host %r (ALLOWED_HOSTS)", host[:100])
            return InvalidRequest(
                "This server does not serve the host named in the Host header."
            ).as_response()
        return self.get_response(request)


# The one API body that is not JSON: a number's music on hold, bounded by its own setting.
HOLD_MUSIC_PATH = re.compile(r"^/api/numbers/[^/]+/hold-music$")


class BodySizeLimitMiddleware:
    """413 for an API request whose declared body is larger than API_MAX_BODY_BYTES (a
    number's music on hold: HOLD_MUSIC_MAX_BYTES), before anything reads it. (DRF reads a
    body without Content-Length as empty.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            limit = settings.API_MAX_BODY_BYTES
            if HOLD_MUSIC_PATH.match(request.path):  # a WAV file, not JSON (issue 58)
                limit = settings.HOLD_MUSIC_MAX_BYTES
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return InvalidRequest("Content-Length is not a number.").as_response()
            if length > limit:
                return _too_large(limit)
        return self.get_response(request)


def _too_large(limit: int):
    return ApplicationError(
        f"The request body is larger than {limit} bytes.", code=ErrorCode.PAYLOAD_TOO_LARGE
    ).as_response()


class DatabaseUnavailableMiddleware:
    """503 JSON while the database cannot be reached, instead of a 500.

    Only connection-level failures (OperationalError, InterfaceError) count; a bug that
    happens to raise a database error elsewhere still reaches handler500 and the logs.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, (OperationalError, InterfaceError)):
            logger.warning("database unavailable: %s", type(exception).__name__)
            return DatabaseUnavailable().as_response()
        return None
