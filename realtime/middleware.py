"""WebSocket middleware: Origin check and JWT authentication from the `token` query parameter."""

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from rest_framework.exceptions import AuthenticationFailed

from accounts import services
from accounts.authentication import session_for_token


class OptionalOriginValidator(OriginValidator):
    """Browsers must send an Origin from ALLOWED_HOSTS; clients that send none are allowed."""

    def valid_origin(self, parsed_origin):
        if parsed_origin is None:
            return True
        return super().valid_origin(parsed_origin)


def origin_validator(app):
    return OptionalOriginValidator(app, settings.ALLOWED_HOSTS)


@database_sync_to_async
def _authenticate(raw_token: str):
    try:
        session = session_for_token(raw_token)
    except AuthenticationFailed:
        return None
    services.session_touch(session=session)
    return session


class JWTQueryAuthMiddleware:
    """Sets scope["user"] and scope["login_session"] from `?token=<JWT>`.

    A missing or bad token leaves an AnonymousUser: the consumer accepts and closes with 4401,
    because a handshake rejection cannot carry a close code.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        scope = dict(scope)
        scope["user"], scope["login_session"] = AnonymousUser(), None
        params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        tokens = params.get("token") or []
        if tokens and tokens[0]:
            session = await _authenticate(tokens[0])
            if session is not None:
                scope["user"], scope["login_session"] = session.user, session
        return await self.app(scope, receive, send)
