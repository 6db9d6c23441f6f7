"""The JSON body of a refusal the HTTP or WebSocket server makes before Django runs (gunicorn's
and Daphne's own parse errors), in Relay's error shape."""

import json

from core.errors import ErrorCode

# The registry's code for each refusal a server makes itself.
ERROR_CODES = {
    400: ErrorCode.INVALID_REQUEST,
    414: ErrorCode.URI_TOO_LONG,
    431: ErrorCode.HEADER_TOO_LARGE,
    500: ErrorCode.SERVER_ERROR,
    503: ErrorCode.SERVICE_UNAVAILABLE,
}


def error_body(status: int, message: str) -> bytes:
    """Relay's error shape, {"error", "code"}; a 4xx without a code of its own is
    invalid_request, anything else server_error."""
    fallback = ErrorCode.INVALID_REQUEST if 400 <= status < 500 else ErrorCode.SERVER_ERROR
    code = ERROR_CODES.get(status, fallback)
    return json.dumps({"error": message, "code": code.value}).encode()


def error_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 response with that body, closing the connection: for a server that
    writes its refusal to the socket itself."""
    body = error_body(status, message)
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
