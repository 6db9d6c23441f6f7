"""WebSocket middleware: the Origin check, and authentication from the upgrade request.

A socket authenticates with the first credential it presents, in this order:
- `?token=<JWT>`: browsers, which cannot set headers on a WebSocket;
- `Authorization: Bearer <JWT>`: server-side clients holding a login session's JWT;
- `X-API-Key: <key>`: server-side clients holding the account's API key. No login session is
  made: a socket per process restart would otherwise add a session each time.
A credential that is present and wrong refuses the socket; no later one is tried, as over HTTP.
Refusals are logged with their reason and the peer's address, never with the credential.
"""

import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from rest_framework.exceptions import AuthenticationFailed

from accounts import services
from accounts.authentication import api_key_user, session_for_token
from core import metrics, requestid

logger = logging.getLogger("relay.security")


def peer(scope) -> str:
    client = scope.get("client") or ("-", 0)
    return str(client[0])


class OptionalOriginValidator(OriginValidator):
    """Browsers must send an Origin from ALLOWED_HOSTS; clients that send none are allowed."""

    def valid_origin(self, parsed_origin):
        if parsed_origin is None or super().valid_origin(parsed_origin):
            return True
        origin_host = parsed_origin.hostname
        logger.warning("ws refused: origin %s is not an allowed host", repr(origin_host)[:100])
        metrics.websocket_refused.labels("origin").inc()
        return False


def origin_validator(app):
    return OptionalOriginValidator(app, settings.ALLOWED_HOSTS)


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def credential(scope) -> tuple[str, str] | None:
    """("jwt", value) or ("api_key", value): the first credential the upgrade request carries."""
    params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    tokens = params.get("token") or []
    if tokens and tokens[0]:
        return "jwt", tokens[0]
    authorization = _header(scope, b"authorization")
    if authorization is not None:
        scheme, _, value = authorization.strip().partition(" ")
        return "jwt", value.strip() if scheme.lower() == "bearer" else ""
    api_key = _header(scope, b"x-api-key")
    if api_key is not None:
        return "api_key", api_key.strip()
    return None


@database_sync_to_async
def _authenticate(kind: str, value: str):
    """(user, login session or None), or None when the credential is refused."""
    try:
        if kind == "api_key":
            return api_key_user(value), None
        session = session_for_token(value)
    except AuthenticationFailed:
        return None
    services.session_touch(session=session)
    return session.user, session


REFUSALS = {
    None: "no credentials (token, Authorization or X-API-Key)",
    "jwt": "invalid or expired token",
    "api_key": "invalid API key",
}
REFUSAL_LABELS = {None: "no_credentials", "jwt": "bad_jwt", "api_key": "bad_api_key"}


class SocketAuthMiddleware:
    """Sets scope["user"], scope["login_session"] (None for an API key),
    scope["auth_refusal"] (why the socket is refused, or None) and scope["request_id"].

    A refused socket is still accepted and then closed with 4401 by the consumer, because a
    handshake rejection cannot carry a close code.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        # This frame lives as long as the socket: it keeps the authenticated scope and nothing
        # of the handshake (the credential, its parsed query string) that made it.
        return await self.app(await self.authenticated(scope), receive, send)

    async def authenticated(self, scope) -> dict:
        scope = dict(scope)
        scope["user"], scope["login_session"], scope["auth_refusal"] = AnonymousUser(), None, None
        # The socket's id, taken from the upgrade's X-Request-Id or made, is on every log line
        # of its lifetime (this task's context) and echoed in the handshake's answer.
        scope["request_id"] = requestid.accept(_header(scope, b"x-request-id"))
        requestid.current.set(scope["request_id"])
        if scope.get("type") == "websocket":
            found = credential(scope)
            authenticated = await _authenticate(*found) if found and found[1] else None
            if authenticated is None:
                kind = found[0] if found else None
                scope["auth_refusal"] = REFUSALS[kind]
                metrics.websocket_refused.labels(REFUSAL_LABELS[kind]).inc()
                logger.warning("ws refused: %s (from %s)", scope["auth_refusal"], peer(scope))
            else:
                scope["user"], scope["login_session"] = authenticated
        return scope
