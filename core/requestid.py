"""The id of the request (or socket) being served, so that every log line it causes can be
found together (DESIGN §5.6). Set by relay.middleware.RequestIdMiddleware for HTTP and by
realtime.middleware for a socket; read by relay.logging for each record. Outside a request
(the worker, the agents, a management command) it is "-"."""

import contextvars
import re
import uuid

NONE = "-"
current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default=NONE)

# What a client's X-Request-Id may be to be kept: a proxy's or a client's own id (a UUID, hex,
# "trace-123:4"). Anything else, or nothing, gets a fresh id: a header that could forge log
# lines (newlines, quotes) or flood them never reaches the log.
_KEPT = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def accept(header: str | None) -> str:
    """The request's id: the client's `X-Request-Id` when it is a plain token of at most 128
    characters, else a new UUID (hex)."""
    if header and _KEPT.fullmatch(header):
        return header
    return uuid.uuid4().hex
