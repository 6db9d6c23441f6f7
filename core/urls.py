"""Outbound URLs that users name (webhooks, status callbacks): their shape, and where they
may lead. A request never goes to a private, loopback, link-local or otherwise non-public
address unless the caller allows it (WEBHOOK_ALLOW_PRIVATE): the address is resolved once,
checked, and that same address is the one connected to, so DNS rebinding cannot reach the
inside."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

URL_MAX_LENGTH = 2000


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook (http or https, a host, no credentials), or None."""
    if len(url) > URL_MAX_LENGTH:
        return f"Must be at most {URL_MAX_LENGTH} characters."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Must be a valid http or https URL."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Must be an http or https URL with a host."
    if parts.username or parts.password:
        return "Must not carry credentials; requests are signed instead."
    if port == 0:
        return "Must be a valid http or https URL."
    return None


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class AddressRefused(ValueError):
    """The destination may not be reached: it is private or local, or does not resolve."""


class Unresolvable(AddressRefused):
    """The host does not resolve (now): not a refusal of where it leads."""


def resolve(url: str, *, allow_private: bool) -> tuple[str, int]:
    """The address to connect to for `url`: its host resolved once (the first address), and
    the port. Unresolvable when it does not resolve; AddressRefused when any address it
    resolves to is not public and `allow_private` is off."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolvable(f"{parts.hostname} does not resolve") from exc
    addresses = [info[4][0] for info in infos]
    if not allow_private and not all(is_public(address) for address in addresses):
        raise AddressRefused(f"{parts.hostname} is a private or local address")
    return addresses[0], port
