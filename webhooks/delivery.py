"""The one adapter that sends webhooks: a signed POST over httpx to an address resolved once
and checked (core.urls), with short timeouts, no redirects followed and the answer's size
capped. Signing follows the Standard Webhooks specification, with its own package
(`standardwebhooks`): `webhook-id`, `webhook-timestamp` and `webhook-signature`, an
HMAC-SHA256 over `id.timestamp.body` with the `whsec_` secret."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from standardwebhooks import Webhook

from core.urls import AddressRefused, resolve

TIMEOUT = httpx.Timeout(5.0, connect=3.0)
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "Relay-Webhooks/1"


@dataclass(frozen=True)
class Attempt:
    delivered: bool
    status: int | None = None
    error: str = ""


def signed_headers(*, secret: str, webhook_id: str, body: str, at: datetime) -> dict[str, str]:
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id=webhook_id, timestamp=at, data=body),
    }


def post(*, url: str, body: str, secret: str, webhook_id: str) -> Attempt:
    """POST `body` to `url`, signed; delivered on any 2xx."""
    try:
        address, port = resolve(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
    except AddressRefused as refused:
        return Attempt(delivered=False, error=str(refused))
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    pinned = urlunsplit((parts.scheme, f"{host}:{port}", parts.path or "/", parts.query, ""))
    headers = {
        "Host": parts.netloc,
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **signed_headers(secret=secret, webhook_id=webhook_id, body=body, at=datetime.now(UTC)),
    }
    try:
        with (
            httpx.Client(timeout=TIMEOUT, follow_redirects=False) as client,
            client.stream(
                "POST",
                pinned,
                content=body.encode(),
                headers=headers,
                extensions={"sni_hostname": parts.hostname},
            ) as response,
        ):
            read = 0
            for chunk in response.iter_bytes():
                read += len(chunk)
                if read >= MAX_ANSWER_BYTES:
                    break
    except httpx.HTTPError as exc:
        return Attempt(delivered=False, error=f"{type(exc).__name__}: {exc}"[:300])
    if 200 <= response.status_code < 300:
        return Attempt(delivered=True, status=response.status_code)
    return Attempt(
        delivered=False,
        status=response.status_code,
        error=f"answered {response.status_code}",
    )
