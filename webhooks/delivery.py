"""The one adapter that sends webhooks: core.signedhttp's signed POST (an address resolved once
and checked, no redirects followed, the answer's size capped), with short timeouts."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from django.conf import settings

from core.signedhttp import signed_post

TIMEOUT = httpx.Timeout(5.0, connect=3.0)
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "Relay-Webhooks/1"


@dataclass(frozen=True)
class Attempt:
    delivered: bool
    status: int | None = None
    error: str = ""


def post(*, url: str, body: str, secret: str, webhook_id: str) -> Attempt:
    """POST `body` to `url`, signed; delivered on any 2xx."""
    answer = signed_post(
        url=url,
        body=body,
        secret=secret,
        message_id=webhook_id,
        timeout=TIMEOUT,
        max_bytes=MAX_ANSWER_BYTES,
        allow_private=settings.WEBHOOK_ALLOW_PRIVATE,
        user_agent=USER_AGENT,
    )
    if answer.status is None:
        return Attempt(delivered=False, error=answer.error)
    if 200 <= answer.status < 300:
        return Attempt(delivered=True, status=answer.status)
    return Attempt(delivered=False, status=answer.status, error=f"answered {answer.status}")
