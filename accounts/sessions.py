"""Ending login sessions: below every service that ends them (the password's, the second
factor's, the account's), so each can end them inside its own transaction."""

from __future__ import annotations

from django.utils import timezone

from accounts.models import LoginSession, User
from core import events


def session_end(*, session: LoginSession) -> None:
    """Mark `session` ended: its JWTs are refused from the next request, its sockets close."""
    updated = LoginSession.objects.filter(pk=session.pk, active=True).update(
        active=False, ended_at=timezone.now()
    )
    if updated:
        events.session_ended_on_commit(session_id=session.pk)


def sessions_end_all(*, user: User, keep: LoginSession | None = None) -> int:
    """End every active session of `user` but `keep` (the one that changed the password or
    turned a second factor on), their JWTs and sockets with them (admin action, password
    changed or reset, a second factor turned on). Returns how many were ended."""
    sessions = LoginSession.objects.filter(user=user, active=True)
    if keep is not None:
        sessions = sessions.exclude(pk=keep.pk)
    ids = list(sessions.values_list("pk", flat=True))
    for session_id in ids:
        session_end(session=LoginSession(pk=session_id, user=user))
    return len(ids)
