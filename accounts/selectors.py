from django.conf import settings

from accounts.models import LoginSession, User


def sessions_newest(*, user: User) -> list[LoginSession]:
    """The user's newest login sessions, active or ended (DASHBOARD_SESSION_COUNT of them)."""
    return list(
        LoginSession.objects.filter(user=user).order_by("-created_at", "-id")[
            : settings.DASHBOARD_SESSION_COUNT
        ]
    )
