"""The one way Relay requests a URL a user named (webhooks, status callbacks, a call's voice
hooks, a WAV a call plays): the host resolved once and checked (core.urls: no private address
unless allowed), that same address connected to, no redirect followed, the answer's size
capped. A POST's body is signed by the Standard Webhooks specification with its own package
(`standardwebhooks`): `webhook-id`, `webhook-timestamp` and `webhook-signature`, an
HMAC-SHA256 over `id.timestamp.body` with the user's `whsec_` secret."""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import httpx
from standardwebhooks import Webhook

from core.urls import AddressRefused, resolve


@dataclass(frozen=True)
class Answer:
    """What came back: the status (None when nothing did, with `error` saying why), the
    answer's Content-Type and its body (up to the cap; `too_large` when it went past)."""

    status: int | None
    error: str = ""
    content_type: str = ""
    body: bytes = b""
    too_large: bool = False


def signed_headers(*, secret: str, message_id: str, body: str, at: datetime) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id=message_id, timestamp=at, data=body),
    }


def _pinned(url: str, allow_private: bool) -> tuple[str, dict, dict]:
    """The URL with its host replaced by the one address it resolved to (checked), the Host
    header naming the host, and the extensions that keep TLS checking the host's name.
    AddressRefused when it leads where it may not."""
    address, port = resolve(url, allow_private=allow_private)
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    pinned = urlunsplit((parts.scheme, f"{host}:{port}", parts.path or "/", parts.query, ""))
    return pinned, {"Host": parts.netloc}, {"sni_hostname": parts.hostname}


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs, the host's name checked), made once: made
    per request it cost about 40 ms, each hook of a call waiting on it. An SSLContext may be
    shared by threads."""
    return httpx.create_ssl_context()


def _read(response, *, max_bytes: int, keep: bool) -> tuple[bytes, bool]:
    """The body, up to `max_bytes` (kept when `keep`), and whether it went past."""
    kept, read = bytearray(), 0
    for chunk in response.iter_bytes():
        read += len(chunk)
        if keep:
            kept += chunk[: max(0, max_bytes - len(kept))]
        if read > max_bytes:
            return bytes(kept), True
    return bytes(kept), False


def _request(
    method: str,
    url: str,
    *,
    headers: dict,
    timeout: httpx.Timeout,
    max_bytes: int,
    allow_private: bool,
    keep_body: bool,
    content: bytes | None = None,
) -> Answer:
    """`method` to the one checked address `url` resolves to, its answer read up to
    `max_bytes` (kept when `keep_body`)."""
    try:
        pinned, host, extensions = _pinned(url, allow_private)
    except AddressRefused as refused:
        return Answer(status=None, error=str(refused))
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False, verify=_tls()) as client,
            client.stream(
                method, pinned, content=content, headers=host | headers, extensions=extensions
            ) as response,
        ):
            body, too_large = _read(response, max_bytes=max_bytes, keep=keep_body)
    except httpx.HTTPError as exc:
        return Answer(status=None, error=f"{type(exc).__name__}: {exc}"[:300])
    return Answer(
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        body=body,
        too_large=too_large,
    )


def fetch(
    *, url: str, timeout: httpx.Timeout, max_bytes: int, allow_private: bool, user_agent: str
) -> Answer:
    """GET `url` (unsigned: what it serves is public, a file to play), its body kept up to
    `max_bytes`; past that the request stops, `too_large`."""
    return _request(
        "GET",
        url,
        headers={"User-Agent": user_agent},
        timeout=timeout,
        max_bytes=max_bytes,
        allow_private=allow_private,
        keep_body=True,
    )


def signed_post(
    *,
    url: str,
    body: str,
    secret: str,
    message_id: str,
    timeout: httpx.Timeout,
    max_bytes: int,
    allow_private: bool,
    user_agent: str,
    keep_body: bool = False,
) -> Answer:
    """POST `body` (JSON) to `url`, signed with `secret`. The answer's body is read up to
    `max_bytes` (and kept when `keep_body`); past that the request stops, `too_large`."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": user_agent,
        **signed_headers(secret=secret, message_id=message_id, body=body, at=datetime.now(UTC)),
    }
    return _request(
        "POST",
        url,
        headers=headers,
        timeout=timeout,
        max_bytes=max_bytes,
        allow_private=allow_private,
        keep_body=keep_body,
        content=body.encode(),
    )
