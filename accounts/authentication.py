"""The two ways to authenticate: `Authorization: Bearer <JWT>` and `X-API-Key: <key>`."""

from __future__ import annotations

import logging
from datetime import datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import TokenError
from rest_framework_simplejwt.tokens import AccessToken

from accounts import apikeys, selectors, services
from accounts.models import LoginSession, User

logger = logging.getLogger(__name__)

INVALID_TOKEN = _("Invalid or expired token.")


def profile_wanted(request) -> bool:
    """Whether the view that will serve `request` shows the user's profile, and so wants its
    ProfileExtras (accounts.selectors) read by the authentication's own query: its action is
    one of the ViewSet's `profile_actions` (accounts.views.UserViewSet: GET /api/user/me).
    DRF sets a ViewSet's action before it authenticates."""
    view = (getattr(request, "parser_context", None) or {}).get("view")
    return getattr(view, "action", None) in getattr(view, "profile_actions", ())


def session_for_token(raw_token: str, *, profile_at: datetime | None = None) -> LoginSession:
    """The active LoginSession behind an access JWT, with its user loaded in the same query
    (and, with `profile_at`, the user's profile_extras: selectors.session_with_user).

    Raises AuthenticationFailed for a bad signature, an expired token, `alg: none`, a token
    without `sid`, an ended session or an inactive user; all give the same message.
    """
    try:
        token = AccessToken(raw_token)
    except TokenError as exc:
        raise exceptions.AuthenticationFailed(INVALID_TOKEN) from exc
    session_id, user_id = token.get("sid"), token.get("user_id")
    if not session_id or not user_id:
        raise exceptions.AuthenticationFailed(INVALID_TOKEN)
    try:
        session = selectors.session_with_user(session_id=session_id, profile_at=profile_at)
    except (DjangoValidationError, ValueError, TypeError) as exc:
        # ValidationError: a signed token whose sid is not a UUID
        raise exceptions.AuthenticationFailed(INVALID_TOKEN) from exc
    if (
        session is None
        or not session.active
        or str(session.user_id) != str(user_id)
        or not session.user.is_active
    ):
        raise exceptions.AuthenticationFailed(INVALID_TOKEN)
    return session


def api_key_user(key: str, *, profile_at: datetime | None = None) -> User:
    """The active user whose API key is `key` (surrounding spaces ignored), with its
    profile_extras given `profile_at` (selectors.user_by_api_key_digest); AuthenticationFailed
    for anything else."""
    key = key.strip()
    if not apikeys.looks_like_key(key):
        raise exceptions.AuthenticationFailed(_("Invalid API key."))
    wanted = apikeys.digest(key)
    user = selectors.user_by_api_key_digest(digest=wanted, profile_at=profile_at)
    # The digest lookup already matched; compare again in constant time so the decision never
    # rests on a short-circuiting string comparison.
    if user is None or not apikeys.digests_match(user.api_key_digest, wanted):
        raise exceptions.AuthenticationFailed(_("Invalid API key."))
    return user


class SessionJWTAuthentication(JWTAuthentication):
    """Bearer JWT whose login session (claim `sid`) must still be active.

    On success request.user is the user and request.auth the LoginSession. One database round
    trip, profile included where the view wants it (profile_wanted), plus the touch of
    last_seen once per SESSION_TOUCH_INTERVAL.
    """

    def authenticate(self, request):
        header = self.get_header(request)
        if header is None:
            return None
        raw_token = self.get_raw_token(header)
        if raw_token is None:
            return None
        profile_at = timezone.now() if profile_wanted(request) else None
        session = session_for_token(raw_token.decode("latin-1"), profile_at=profile_at)
        services.session_touch(session=session)
        request.jwt = raw_token.decode("latin-1")
        return session.user, session


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`X-API-Key: vr_...`, found by its SHA-256 digest, in one database round trip (profile
    included where the view wants it). request.auth is None."""

    header = "HTTP_X_API_KEY"

    def authenticate(self, request):
        key = request.META.get(self.header)
        if key is None:
            return None
        profile_at = timezone.now() if profile_wanted(request) else None
        return api_key_user(key, profile_at=profile_at), None

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class SessionJWTScheme(OpenApiAuthenticationExtension):
    target_class = SessionJWTAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = ApiKeyAuthentication
    name = "apiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "X-API-Key"}
