"""Telephony (TELEPHONY_PROVIDER=sip; docs/telephony.md): the SIP trunk and how to reach it,
the agents and their media, the numbers calls come from, and speech.

Every variable is read and checked whatever the provider, so that a wrong one is found before
the day SIP is switched on; only the trunk itself is required for `sip` alone.
"""

import ipaddress

import phonenumbers

from relay.settings.base import VAR_DIR
from relay.settings.calls import TELEPHONY_PROVIDER
from relay.settings.readers import (
    boolean,
    choice,
    each_parsed,
    must,
    parsed,
    path,
    readable_file,
    seconds,
    text,
    whole_number,
)
from telephony.sip.dns import parse_trunk_uri
from voiceapps import languages

# --- The trunk ------------------------------------------------------------------------------
SIP_TRUNK_URI = text("SIP_TRUNK_URI")
SIP_USERNAME = text("SIP_USERNAME")
SIP_PASSWORD = text("SIP_PASSWORD")
# udp, tcp or tls; a sips: trunk URI means tls (docs/telephony.md, "TLS and SRTP").
SIP_TRANSPORT = choice(
    "SIP_TRANSPORT",
    "tls" if SIP_TRUNK_URI.lower().startswith("sips:") else "udp",
    ("udp", "tcp", "tls"),
    lower=True,
)
# TLS: the CA bundle the trunk's certificate is checked against (default: the system's), and
# the agent's own certificate and key (for inbound calls over TLS, and trunks that want
# mutual TLS).
SIP_TLS_CA_FILE = readable_file("SIP_TLS_CA_FILE")
SIP_TLS_CERT_FILE = readable_file("SIP_TLS_CERT_FILE")
SIP_TLS_KEY_FILE = readable_file("SIP_TLS_KEY_FILE")
# SRTP (SDES, AES_CM_128_HMAC_SHA1_80): off, optional (offered, and taken when offered) or
# required (an unencrypted call is refused). Keys travel in the SDP: only over TLS.
SIP_SRTP = choice("SIP_SRTP", "off", ("off", "optional", "required"), lower=True)
# REGISTER with the trunk (as SIP_USERNAME) and keep the registration fresh; for trunks that
# want it. Trunks that only challenge each INVITE need only the credentials.
SIP_REGISTER = boolean("SIP_REGISTER", False)
SIP_REGISTER_EXPIRES = whole_number(
    "SIP_REGISTER_EXPIRES", 300, maximum=24 * 60 * 60, unit=" (seconds)"
)


def _dns_server(value: str) -> tuple[str, int]:
    """`192.0.2.53`, `192.0.2.53:5353`, `2001:db8::53` or `[2001:db8::53]:5353` as (ip, port);
    ValueError for anything else."""
    if value.startswith("["):
        address, _, port = value[1:].partition("]")
        port = port.removeprefix(":")
    elif value.count(":") == 1:
        address, _, port = value.partition(":")
    else:
        address, port = value, ""
    ipaddress.ip_address(address)
    number = int(port or 53)
    if not 0 < number < 65536:
        raise ValueError(value)
    return address, number


# The DNS servers that find the trunk (RFC 3263: NAPTR, SRV, A/AAAA), comma-separated, as
# [(ip, port)]; empty: the system's resolvers.
SIP_DNS_SERVERS = each_parsed(
    "SIP_DNS_SERVERS",
    _dns_server,
    expected="IP addresses, each with an optional port, like 192.0.2.53,192.0.2.54:5353",
)

try:
    _trunk = parse_trunk_uri(SIP_TRUNK_URI)
except ValueError:
    _trunk = None
must(
    TELEPHONY_PROVIDER != "sip" or _trunk,
    "SIP_TRUNK_URI must be a sip: or sips: URI, like sip:trunk.example.com or "
    f"sip:203.0.113.5:5060, not {SIP_TRUNK_URI!r}",
)
# The agent speaks SIP_TRANSPORT only: a trunk URI that asks for another (sips: means TLS)
# could never be reached, and a sips: URI is never sent in clear.
_wanted = _trunk and (_trunk.transport or ("tls" if _trunk.secure else None))
must(
    TELEPHONY_PROVIDER != "sip" or not _wanted or _wanted == SIP_TRANSPORT,
    f"SIP_TRUNK_URI asks for {_wanted} (a sips: URI or a transport= parameter), but "
    f"SIP_TRANSPORT is {SIP_TRANSPORT}",
)
must(
    bool(SIP_TLS_CERT_FILE) == bool(SIP_TLS_KEY_FILE),
    "SIP_TLS_CERT_FILE and SIP_TLS_KEY_FILE are set together",
)
must(
    SIP_SRTP == "off" or SIP_TRANSPORT == "tls",
    "SIP_SRTP needs SIP_TRANSPORT=tls: its keys travel in the SDP, which must not "
    "cross the network in clear",
)
must(not SIP_REGISTER or SIP_USERNAME, "SIP_REGISTER needs SIP_USERNAME and SIP_PASSWORD")
must(
    bool(SIP_USERNAME) == bool(SIP_PASSWORD),
    "SIP_USERNAME and SIP_PASSWORD are set together or not at all",
)

# --- The agents and their media ---------------------------------------------------------------


def _bind(value: str) -> tuple[str, str, int]:
    """SIP_BIND as itself, its host and its port; ValueError unless it is host:port."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(value)
    return value, host, int(port)


def _port_range(value: str) -> tuple[str, tuple[int, int]]:
    """RTP_PORT_RANGE as itself and (first, last); ValueError unless it is first-last."""
    first, _, last = value.partition("-")
    if not (first.isdigit() and last.isdigit() and 1024 <= int(first) < int(last) <= 65535):
        raise ValueError(value)
    return value, (int(first), int(last))


SIP_BIND, SIP_BIND_HOST, SIP_BIND_PORT = parsed(
    "SIP_BIND",
    "0.0.0.0:5060",  # noqa: S104 - a SIP agent listens
    _bind,
    expected="host:port, like 0.0.0.0:5060",
)
SIP_PUBLIC_ADDRESS = text("SIP_PUBLIC_ADDRESS")
# Symmetric RTP: media from a source other than the SDP's address (a caller behind NAT) is
# latched onto in the first seconds, and answered there (docs/telephony.md, "Media").
SIP_MEDIA_LATCHING = boolean("SIP_MEDIA_LATCHING", True)
RTP_PORT_RANGE, RTP_PORTS = parsed(
    "RTP_PORT_RANGE",
    "20000-20999",
    _port_range,
    expected="first-last within 1024-65535, like 20000-20999",
)
SIP_RING_TIMEOUT = seconds("SIP_RING_TIMEOUT", 30.0, above=True)
SIP_MAX_CALL_SECONDS = seconds("SIP_MAX_CALL_SECONDS", 300.0, above=True)
SIP_MAX_CONCURRENT_CALLS = whole_number("SIP_MAX_CONCURRENT_CALLS", 50, maximum=10_000)
SIP_AGENTS = whole_number("SIP_AGENTS", 1, maximum=1024)


def _rtp_calls_per_agent(first: int, last: int, agents: int) -> int:
    """How many calls the agent with the fewest RTP ports can hold: the range first-last
    counts both ends, each agent takes an equal share of it (telephony.agent.agent_config),
    and a call takes an even port and the one above it, within the share (RFC 3550 §11;
    telephony.sip.ua.UserAgent's pool)."""
    share = (last - first + 1) // agents
    starts = [first + index * share for index in range(agents)]
    return min(len(range(start + start % 2, start + share - 1, 2)) for start in starts)


must(
    _rtp_calls_per_agent(*RTP_PORTS, SIP_AGENTS) >= SIP_MAX_CONCURRENT_CALLS,
    "RTP_PORT_RANGE is too small: each call needs two ports (an even one and the next), for "
    f"SIP_MAX_CONCURRENT_CALLS ({SIP_MAX_CONCURRENT_CALLS}) calls on each of "
    f"SIP_AGENTS ({SIP_AGENTS}) agents",
)
SIP_POLL_INTERVAL = seconds("SIP_POLL_INTERVAL", 0.05, above=True)
# A draining agent (SIGTERM, `telephony_agent --drain`) takes no new call and keeps its live
# ones up to this long, then hangs up what is left and exits (docs/operations.md).
SIP_DRAIN_SECONDS = seconds("SIP_DRAIN_SECONDS", SIP_MAX_CALL_SECONDS, above=False)

# --- Where inbound calls come from ------------------------------------------------------------


def _inbound_source(value: str) -> str:
    if value.lower() != "any":
        ipaddress.ip_network(value, strict=False)
    return value


# Where inbound calls may come from: the trunk's own address always, plus these addresses
# or networks (comma-separated; `any` takes calls from anywhere).
SIP_INBOUND_SOURCES = each_parsed(
    "SIP_INBOUND_SOURCES", _inbound_source, expected="IP addresses or networks (or any)"
)


def _region(value: str) -> str:
    if value.upper() not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(value)
    return value.upper()


# The region of numbers a trunk sends in national form (020 7946 0001), as phonenumbers
# knows regions (GB, US, DE...).
SIP_NATIONAL_REGION = parsed(
    "SIP_NATIONAL_REGION", "GB", _region, expected="a region code like GB or US"
)

# --- Speech -----------------------------------------------------------------------------------
TTS_DEFAULT_LANGUAGE = choice(
    "TTS_DEFAULT_LANGUAGE",
    "en",
    languages.LANGUAGES,
    described="a language espeak-ng speaks (see voiceapps/languages.py)",
)
TTS_CACHE_DIR = path("TTS_CACHE_DIR", VAR_DIR / "tts")
# The speech cache's bound: purge_expired removes the messages used longest ago past it, never
# one used within a call's longest life (telephony.speech.cache_trim).
TTS_CACHE_MAX_MB = whole_number("TTS_CACHE_MAX_MB", 500, maximum=10**7, unit=" (MB)")

# --- Calls from the browser (telephony.webrtc) ------------------------------------------------
# STUN and TURN servers for the agent's side of a browser's call (`stun:host:3478`,
# `turn:host:3478`), comma-separated. Empty: host candidates alone, enough on one host or a LAN.


def _ice_server(item: str) -> str:
    if not item.startswith(("stun:", "stuns:", "turn:", "turns:")):
        raise ValueError(item)
    return item


RTC_ICE_SERVERS = tuple(each_parsed("RTC_ICE_SERVERS", _ice_server, expected="stun: or turn: URLs"))
# The TURN server's shared secret (coturn's `static-auth-secret`, `use-auth-secret`): each page
# and each agent's leg is given a username and password of its own for the turn: URLs, valid
# RTC_TURN_TTL seconds (core.webrtc.ice_servers). Empty: the turn: URLs are given without.
RTC_TURN_SECRET = text("RTC_TURN_SECRET")
RTC_TURN_TTL = whole_number("RTC_TURN_TTL", 3600, minimum=60, maximum=86400, unit=" s")
# The UDP ports of the agent's WebRTC legs (ICE, then DTLS-SRTP on the same port): one a leg.
RTC_PORT_RANGE, RTC_PORTS = parsed(
    "RTC_PORT_RANGE",
    "21000-21999",
    _port_range,
    expected="first-last within 1024-65535, like 21000-21999",
)
# A connected browser leg's RTP on a short path of plain calls (telephony/webrtc/fastpath.py),
# reading aiortc's and aioice's internals. Off: it stays on aiortc's own path, the same
# audio at more CPU (an off switch for an upgrade of either; tests/platform/edges.py).
WEBRTC_FAST_PATH = boolean("WEBRTC_FAST_PATH", True)
