from core.pagination import Page
from realtime.models import CallRequest


def calls_page(*, user, status: str | None, limit: int, offset: int) -> Page:
    """The user's outbound calls, newest first; same paging as history."""
    calls = CallRequest.objects.filter(owner=user)
    if status is not None:
        calls = calls.filter(status=status)
    total = calls.count()
    page = (
        list(calls.order_by("-created_at", "-id")[offset : offset + limit])
        if offset < total
        else []
    )
    return Page(records=page, total=total, limit=limit, offset=offset)
