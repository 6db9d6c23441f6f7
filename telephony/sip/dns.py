"""Where the trunk is: RFC 3263 §4 (NAPTR, then SRV, then A/AAAA), with dnspython.

`TrunkResolver.resolve(uri)` turns SIP_TRUNK_URI into the targets to try, in order: each a
transport, the name it was found under, a port and one address. The lookups themselves are
dnspython's, each with a timeout, and answers are cached for their TTL (dnspython's cache).
Nothing here sends SIP: the user agent (ua.py) tries the targets.

A SIP URI a user named (a ring list's sip: entry, a transfer's target) is resolved the same way,
and then `allowed_targets` keeps only the targets whose address is public (core.urls.is_public,
as for webhooks) unless private addresses are allowed: every address the user agent would try
is checked, and the INVITE goes to that same address, never to a name resolved again.

With `nameservers` every lookup goes to those servers. Without, NAPTR and SRV go to the
system's resolvers (/etc/resolv.conf) and A/AAAA to the operating system's own resolution
(getaddrinfo), which also reads /etc/hosts and container names, as the agent always did.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import dns.asyncresolver
import dns.exception
import dns.name
import dns.nameserver
import dns.resolver

from core.urls import is_public

LOOKUP_TIMEOUT = 2.0  # seconds for one lookup, all servers and retries included

DEFAULT_PORTS = {"udp": 5060, "tcp": 5060, "tls": 5061}
# RFC 3263 §4.1: the NAPTR services of SIP, and the SRV names for each transport.
NAPTR_SERVICES = {"SIP+D2U": "udp", "SIP+D2T": "tcp", "SIPS+D2T": "tls"}
SRV_PREFIXES = {"udp": "_sip._udp", "tcp": "_sip._tcp", "tls": "_sips._tcp"}
# Without NAPTR records, the transports a client that supports them all tries, in order.
PREFERENCE = ("udp", "tcp", "tls")


@dataclass(frozen=True)
class Target:
    """One place to send the INVITE: `address`:`port` over `transport`; `host` is the name it
    was found under (an SRV target, or the URI's host)."""

    transport: str  # udp, tcp or tls
    host: str
    port: int
    address: str

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.transport}"

    def described(self) -> str:
        """For the log: host:port/transport, and the address when the host is a name."""
        return str(self) if self.host == self.address else f"{self} ({self.address})"


class TrunkNotFound(OSError):
    """No target for the trunk's host. An OSError, like the socket.gaierror it replaces:
    whatever handled a host that does not resolve handles this too."""


class TargetRefused(TrunkNotFound):
    """A SIP URI a user named resolves, but only to addresses it may not lead to (private,
    loopback, link-local...: allowed_targets)."""


def public_address(host: str) -> bool:
    """Whether `host` is an IP address (text) that leads to the public Internet
    (core.urls.is_public: IPv6 forms that carry an IPv4 address judged by it). A name is
    not: it has not been checked, and resolving it again would not be the address checked."""
    try:
        return is_public(host)
    except ValueError:
        return False


def allowed_targets(
    targets: list[Target], *, allow_private: bool
) -> tuple[list[Target], list[Target]]:
    """`targets` (of a SIP URI a user named) split into those that may be tried, in their
    order, and those refused: with `allow_private` (WEBHOOK_ALLOW_PRIVATE) every one may;
    otherwise only those whose address is public (public_address). Every NAPTR, SRV and A/AAAA
    result is a Target with its address, so each address the INVITE could go to is judged."""
    if allow_private:
        return list(targets), []
    allowed = [target for target in targets if public_address(target.address)]
    return allowed, [target for target in targets if target not in allowed]


@dataclass(frozen=True)
class TrunkUri:
    secure: bool  # sips:
    host: str  # the TARGET of RFC 3263 §4: maddr if present, else the host part
    port: int | None  # None when the URI names none
    transport: str | None  # the transport= parameter, lowercased (tcp under sips: is tls)

    @property
    def numeric(self) -> bool:
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return True


def parse_trunk_uri(uri: str) -> TrunkUri:
    """`sip:[user@]host[:port][;params]` or `sips:...`; ValueError for anything else."""
    scheme, _, rest = uri.partition(":")
    if scheme.lower() not in ("sip", "sips") or not rest:
        raise ValueError(f"not a sip: or sips: URI: {uri!r}")
    rest = rest.split("?", 1)[0]
    rest = rest.rsplit("@", 1)[1] if "@" in rest else rest
    hostport, *parameters = rest.split(";")
    if hostport.startswith("["):  # an IPv6 reference
        host, _, port = hostport[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = hostport.partition(":")
    if not host or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise ValueError(f"no host, or a bad port, in {uri!r}")
    values = {}
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        values[name.strip().lower()] = value.strip().lower()
    secure = scheme.lower() == "sips"
    transport = values.get("transport") or None
    if transport not in (None, *DEFAULT_PORTS):
        raise ValueError(f"transport={transport} is not udp, tcp or tls, in {uri!r}")
    if secure and transport == "tcp":
        transport = "tls"  # RFC 3261 §26.2: a SIPS URI over TCP means TLS over TCP
    return TrunkUri(
        secure=secure,
        host=(values.get("maddr") or host).rstrip(".").lower(),
        port=int(port) if port else None,
        transport=transport,
    )


def srv_order(records: Iterable, rng: random.Random) -> list:
    """SRV records in the order to try them (RFC 2782): lowest priority first, and within a
    priority a weighted random draw, each record's chance in proportion to its weight."""
    ordered = []
    records = list(records)
    for priority in sorted({record.priority for record in records}):
        # Sorted first, so that a given `rng` gives the same order whatever order the server
        # sent; zero weights at the beginning, as the RFC's draw requires.
        group = sorted(
            (r for r in records if r.priority == priority),
            key=lambda r: (r.weight != 0, str(r.target), r.port),
        )
        while group:
            # RFC 2782: "compute the sum of the weights of those RRs, and with each RR
            # associate the running sum in the selected order. Then choose a uniform random
            # number between 0 and the sum computed (inclusive), and select the RR whose
            # running sum value is the first in the selected order which is greater than or
            # equal to the random number selected."
            pick = rng.randint(0, sum(r.weight for r in group))
            index, running = 0, group[0].weight
            while running < pick:
                index += 1
                running += group[index].weight
            ordered.append(group.pop(index))
    return ordered


class TrunkResolver:
    """RFC 3263 resolution of trunk URIs, through `nameservers` ([(ip, port)]) or, without
    them, the system's resolvers. Keeps one dnspython resolver and its cache."""

    def __init__(
        self,
        nameservers: list[tuple[str, int]] | None = None,
        *,
        timeout: float = LOOKUP_TIMEOUT,
        rng: random.Random | None = None,
    ) -> None:
        self.nameservers = list(nameservers or [])
        self.timeout = timeout
        self.rng = rng or random.SystemRandom()
        self._resolver: dns.asyncresolver.Resolver | None = None

    def _dns(self) -> dns.asyncresolver.Resolver:
        # Made on first use: a trunk given by its address never needs /etc/resolv.conf.
        if self._resolver is None:
            if self.nameservers:
                resolver = dns.asyncresolver.Resolver(configure=False)
                resolver.nameservers = [
                    dns.nameserver.Do53Nameserver(address, port)
                    for address, port in self.nameservers
                ]
            else:
                try:
                    resolver = dns.asyncresolver.Resolver()
                except dns.resolver.NoResolverConfiguration as exc:
                    raise TrunkNotFound(f"no DNS resolver configured: {exc}") from exc
            resolver.timeout = self.timeout
            resolver.lifetime = self.timeout
            resolver.cache = dns.resolver.Cache()  # honours each answer's TTL
            self._resolver = resolver
        return self._resolver

    async def _query(self, name: str, rdtype: str) -> list:
        """The records of `name`; none when it has none (NXDOMAIN, no data, or the servers
        refused). A lookup that times out is an error: the DNS is not answering."""
        try:
            answer = await self._dns().resolve(name, rdtype, lifetime=self.timeout, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer, dns.resolver.NoNameservers):
            return []
        except dns.exception.Timeout as exc:
            raise TrunkNotFound(
                f"DNS did not answer within {self.timeout:g} s for {rdtype} {name}"
            ) from exc
        return list(answer)

    async def _addresses(self, name: str) -> list[str]:
        """A then AAAA addresses of `name`."""
        if not self.nameservers:
            return await self._system_addresses(name)
        a, aaaa = await asyncio.gather(self._query(name, "A"), self._query(name, "AAAA"))
        return [record.address for record in a + aaaa]

    async def _system_addresses(self, name: str) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(name, None, type=socket.SOCK_DGRAM), self.timeout
            )
        except socket.gaierror:
            return []
        except TimeoutError as exc:
            raise TrunkNotFound(f"no answer within {self.timeout:g} s for {name}") from exc
        addresses = [info[4][0] for info in infos]
        ipv4 = [address for address in addresses if ":" not in address]
        ipv6 = [address for address in addresses if ":" in address]
        return list(dict.fromkeys(ipv4 + ipv6))

    async def _hosts(self, name: str, port: int, transport: str) -> list[Target]:
        return [Target(transport, name, port, address) for address in await self._addresses(name)]

    async def _srv(self, name: str, transport: str) -> list[Target]:
        records = [
            record
            for record in await self._query(name, "SRV")
            # RFC 2782: "A Target of '.' means that the service is decidedly not available".
            if record.target != dns.name.root
        ]
        expanded = await asyncio.gather(
            *(
                self._hosts(record.target.to_text(omit_final_dot=True), record.port, transport)
                for record in srv_order(records, self.rng)
            )
        )
        return [target for targets in expanded for target in targets]

    async def _naptr(self, domain: str, allowed: tuple[str, ...]) -> list[Target]:
        records = []
        for record in await self._query(domain, "NAPTR"):
            transport = NAPTR_SERVICES.get(record.service.decode().upper())
            # RFC 3263 §4.1: records for transports the client does not support are
            # discarded, and "a client resolving a SIPS URI MUST discard any services that do
            # not contain 'SIPS' as the protocol" (`allowed` holds only tls then). SIP's
            # NAPTR records lead to SRV records: the "s" flag.
            if transport in allowed and record.flags.decode().lower() == "s":
                records.append((record.order, record.preference, record, transport))
        targets: list[Target] = []
        for _order, _preference, record, transport in sorted(records, key=lambda r: r[:2]):
            if record.replacement != dns.name.root:
                name = record.replacement.to_text(omit_final_dot=True)
                targets += await self._srv(name, transport)
        return targets

    async def resolve(self, uri: str, *, transport: str | None = None) -> list[Target]:
        """The targets of `uri`, in the order to try them; TrunkNotFound when there is none.

        The transport is the URI's `transport=` parameter, else TLS for `sips:`, else
        `transport` (the one the client uses), else whatever NAPTR, then SRV, prefer.
        """
        trunk = parse_trunk_uri(uri)
        fixed = trunk.transport or ("tls" if trunk.secure else None) or transport
        # RFC 3263 §4.1: "If the URI specifies a transport protocol in the transport
        # parameter, that transport protocol SHOULD be used." Otherwise, for a numeric IP or
        # an explicit port, "the client SHOULD use UDP for a SIP URI, and TCP for a SIPS URI".
        plain = fixed or ("tls" if trunk.secure else "udp")
        if trunk.numeric:
            # §4.2: "If TARGET is a numeric IP address, the client uses that address. If the
            # URI also contains a port, it uses that port. If no port is specified, it uses
            # the default port for the particular transport protocol."
            port = trunk.port or DEFAULT_PORTS[plain]
            return [Target(plain, trunk.host, port, trunk.host)]
        if trunk.port is not None:
            # §4.2: "If the TARGET was not a numeric IP address, but a port is present in the
            # URI, the client performs an A or AAAA record lookup of the domain name."
            targets = await self._hosts(trunk.host, trunk.port, plain)
        else:
            allowed = (fixed,) if fixed else PREFERENCE
            targets = []
            if not trunk.transport:
                # §4.1: without a transport parameter, a domain with no port gets NAPTR.
                targets = await self._naptr(trunk.host, allowed)
            if not targets:
                # §4.1: "If no NAPTR records are found, the client constructs SRV queries
                # for those transport protocols it supports, and does a query for each."
                for each in allowed:
                    targets += await self._srv(f"{SRV_PREFIXES[each]}.{trunk.host}", each)
            if not targets:
                # §4.2: "If no SRV records were found, the client performs an A or AAAA
                # record lookup of the domain name", on the transport's default port.
                targets = await self._hosts(trunk.host, DEFAULT_PORTS[plain], plain)
        if not targets:
            raise TrunkNotFound(f"no address found for the trunk's host {trunk.host}")
        return targets


async def resolve_targets(
    uri: str,
    *,
    transport: str | None = None,
    nameservers: list[tuple[str, int]] | None = None,
    rng: random.Random | None = None,
    timeout: float = LOOKUP_TIMEOUT,
) -> list[Target]:
    """`uri`'s targets in the order to try them (TrunkResolver.resolve, without a cache)."""
    resolver = TrunkResolver(nameservers, timeout=timeout, rng=rng)
    return await resolver.resolve(uri, transport=transport)
