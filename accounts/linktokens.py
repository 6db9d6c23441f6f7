"""The tokens of mailed links (a password reset, an address to confirm): the user's id, a dot,
and a token of a Django PasswordResetTokenGenerator, which is an HMAC over what the link may
change (so it dies once used) and a timestamp (so it expires). Nothing about it is stored."""

from __future__ import annotations

import uuid

from django.contrib.auth.tokens import PasswordResetTokenGenerator

from accounts.models import User


def link_token_make(*, generator: PasswordResetTokenGenerator, user: User) -> str:
    """A token of `generator` for `user` as they are now."""
    return f"{user.pk.hex}.{generator.make_token(user)}"


def link_token_user(*, generator: PasswordResetTokenGenerator, token: str) -> User | None:
    """The active user `token` is valid for now, or None: malformed, unknown, used, expired, or
    outdated by a change of what its HMAC covers. The HMAC is compared in constant time."""
    user_part, _, generated = token.partition(".")
    try:
        user_id = uuid.UUID(hex=user_part)
    except ValueError:
        return None
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None or not generator.check_token(user, generated):
        return None
    return user
