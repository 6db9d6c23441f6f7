"""Outbound URLs that users name (webhooks, status callbacks): their shape, and where they
may lead. A request never goes to a private, loopback, link-local or otherwise non-public
address unless the caller allows it (WEBHOOK_ALLOW_PRIVATE): the address is resolved once,
checked, and that same address is the one connected to, so DNS rebinding cannot reach the
inside."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
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


def _low_32_bits(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _sixtofour(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)


# IPv6 forms that carry an IPv4 address, and how to read it: a host that translates or tunnels
# them (NAT64, a 6to4 relay, a Teredo server) delivers the packet to that IPv4 address, so the
# address judged must be the IPv4 one. None refuses the whole prefix: where the IPv4 address
# sits depends on the operator's own set-up, so it cannot be judged. A new form is one row here.
EMBEDDED_IPV4: tuple[
    tuple[ipaddress.IPv6Network, Callable[[ipaddress.IPv6Address], ipaddress.IPv4Address] | None],
    ...,
] = (
    (ipaddress.IPv6Network("::ffff:0:0/96"), _low_32_bits),  # IPv4-mapped, RFC 4291 2.5.5.2
    (ipaddress.IPv6Network("::/96"), _low_32_bits),  # IPv4-compatible, RFC 4291 2.5.5.1
    (ipaddress.IPv6Network("64:ff9b::/96"), _low_32_bits),  # NAT64 well-known, RFC 6052 2.1
    (ipaddress.IPv6Network("64:ff9b:1::/48"), None),  # NAT64 local use, RFC 8215
    (ipaddress.IPv6Network("2002::/16"), _sixtofour),  # 6to4, RFC 3056 2
    (ipaddress.IPv6Network("2001::/32"), None),  # Teredo, RFC 4380 4 (the client obfuscated)
)


def embedded_ipv4(
    ip: ipaddress.IPv6Address,
) -> tuple[bool, ipaddress.IPv4Address | None]:
    """Whether `ip` is of a form that carries an IPv4 address (EMBEDDED_IPV4), and that
    address: (True, None) for a form whose address cannot be read, (False, None) for a plain
    IPv6 address."""
    for network, extract in EMBEDDED_IPV4:
        if ip in network:
            return True, extract(ip) if extract is not None else None
    return False, None


def is_public(address: str) -> bool:
    """Whether `address` (IPv4 or IPv6, as text) leads to the public Internet: global and not
    multicast, judged on the IPv4 address an IPv6 form carries (EMBEDDED_IPV4), and never
    for a form whose IPv4 address cannot be read."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embeds, ipv4 = embedded_ipv4(ip)
        if embeds:
            if ipv4 is None:
                return False
            ip = ipv4
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


def destination_problem(url: str, *, allow_private: bool) -> str | None:
    """Why a request to `url` may not be made (it leads to a private or local address and
    `allow_private` is off), or None. A host that does not resolve yet is no problem here: its
    DNS may be on its way, and every request to it resolves and checks it again (resolve)."""
    try:
        resolve(url, allow_private=allow_private)
    except Unresolvable:
        return None
    except AddressRefused as refused:
        return str(refused)
    return None
