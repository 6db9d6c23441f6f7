"""Reads of outbound calls: the caller's own (a 404 for anything else) and their pages."""

from accounts.models import User
from core import parsing
from core.errors import NotFound
from core.pagination import Page
from realtime.models import CallRequest


def call_access(*, user: User, call_id: str) -> CallRequest:
    """The user's call with this callId; NotFound for one that is unknown, another user's,
    or that no call can have (control characters are refused when calls are submitted)."""
    if parsing.id_problem(call_id):
        raise NotFound()
    call = CallRequest.objects.filter(owner=user, call_id=call_id).first()
    if call is None:
        raise NotFound()
    return call


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
