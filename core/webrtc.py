"""What a browser's WebRTC offer must be before aiortc reads it (issue 43): small, plain text,
one or more audio sections, DTLS-SRTP with a SHA-256 fingerprint, ICE credentials, and G.711
or Opus among its codecs. A hostile or broken offer is refused here with a sentence, so that
it never reaches the peer connection, and never another call."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time

from django.conf import settings

MAX_SDP_BYTES = 16 * 1024  # a browser's audio offer is 2-5 KiB
MAX_LINE = 1024
G711 = {"PCMU": 0, "PCMA": 8}
_FINGERPRINT = re.compile(r"^a=fingerprint:sha-256 ((?:[0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2})$")
_RTPMAP = re.compile(r"^a=rtpmap:(\d{1,3}) ([A-Za-z0-9-]{1,32})/(\d{1,6})(?:/\d{1,2})?$")


class OfferRefused(ValueError):
    """The offer cannot be answered; its text says why, for the error frame."""


def offer_problem(sdp: object) -> str | None:
    """Why `sdp` is no offer this agent answers, or None."""
    if not isinstance(sdp, str):
        return "the offer's SDP must be a string"
    if len(sdp.encode("utf-8", "surrogatepass")) > MAX_SDP_BYTES:
        return f"the offer's SDP is over {MAX_SDP_BYTES} bytes"
    if not sdp.isascii() or any(c < " " and c not in "\r\n" for c in sdp):
        return "the offer's SDP holds characters SDP does not allow"
    lines = [line for line in sdp.replace("\r\n", "\n").split("\n") if line]
    if not lines or lines[0] != "v=0":
        return "the offer's SDP must start with v=0"
    if any(len(line) > MAX_LINE or len(line) < 2 or line[1] != "=" for line in lines):
        return "the offer's SDP has a line that is not type=value"
    if not any(line.startswith("m=audio ") for line in lines):
        return "the offer has no audio"
    if not any(_FINGERPRINT.match(line) for line in lines):
        return "the offer has no DTLS fingerprint (sha-256)"
    if not any(line.startswith("a=ice-ufrag:") for line in lines) or not any(
        line.startswith("a=ice-pwd:") for line in lines
    ):
        return "the offer has no ICE credentials"
    if offered_codec(lines) is None:
        return "the offer has none of PCMU, PCMA and Opus"
    return None


def offered_codec(lines: list[str]) -> str | None:
    """What the agent answers an offer's `lines` with: "G711" when it has PCMU or PCMA (relayed
    as they are), else "OPUS" when it has Opus (transcoded), else None."""
    codecs = {(m[2].upper(), m[3]) for line in lines if (m := _RTPMAP.match(line))}
    if any((name, "8000") in codecs for name in G711):
        return "G711"
    if ("OPUS", "48000") in codecs:
        return "OPUS"
    return None


BROWSER = "browser"  # the forwarding target that rings the owner's console tabs
MAX_CANDIDATE = 1024
MAX_MID = 32
_CANDIDATE = re.compile(
    r"^(?:a=)?candidate:[!-~]{1,32} \d{1,3} (?:udp|tcp|UDP|TCP) \d{1,10} [0-9A-Za-z.:_-]{1,253} "
    r"\d{1,5} typ (?:host|srflx|prflx|relay)(?: [!-~]{1,253})*$"
)


def candidate_problem(candidate: object, sdp_mid: object = None) -> str | None:
    """Why `candidate` (an `rtc_candidate` frame's ICE candidate line, RFC 8839 section 5.1,
    with its `sdpMid`) is none the agent takes, or None."""
    if not isinstance(candidate, str):
        return "candidate must be a string"
    if len(candidate) > MAX_CANDIDATE:
        return f"candidate is over {MAX_CANDIDATE} characters"
    if not _CANDIDATE.match(candidate):
        return "candidate is no ICE candidate line (candidate:... typ host|srflx|prflx|relay)"
    if sdp_mid is not None and not (
        isinstance(sdp_mid, str) and sdp_mid.isascii() and sdp_mid.isprintable()
        and 0 < len(sdp_mid) <= MAX_MID
    ):  # fmt: skip
        return f"sdpMid must be a short string (at most {MAX_MID} characters)"
    return None


def ice_servers(*, urls: tuple[str, ...], secret: str, ttl: int, name: str, now: float) -> list:
    """RTCIceServer dicts for `urls` (RTC_ICE_SERVERS): a stun: URL as it is; a turn: URL,
    with a `secret` (RTC_TURN_SECRET), with a username and password of its own for `name`
    that the TURN server accepts until `ttl` seconds from `now` (the TURN REST API scheme
    coturn's use-auth-secret checks: the username is `expiry:name`, the password its
    HMAC-SHA1 under the secret, in base64). The secret itself never leaves the server."""
    servers, turns = [], []
    for url in urls:
        (turns if url.startswith(("turn:", "turns:")) else servers).append(url)
    servers = [{"urls": url} for url in servers]
    if turns and secret:
        username = f"{int(now) + ttl}:{name}"
        digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
        credential = base64.b64encode(digest).decode()
        servers.append({"urls": turns, "username": username, "credential": credential})
    elif turns:
        servers.append({"urls": turns})
    return servers


def ice_servers_for(name: str) -> list:
    """ice_servers from the settings (RTC_ICE_SERVERS, RTC_TURN_SECRET, RTC_TURN_TTL), with
    TURN credentials for `name` valid from now: the agent's and each tab's."""
    return ice_servers(
        urls=settings.RTC_ICE_SERVERS,
        secret=settings.RTC_TURN_SECRET,
        ttl=settings.RTC_TURN_TTL,
        name=name,
        now=time.time(),
    )
