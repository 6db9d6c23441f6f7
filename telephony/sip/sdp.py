"""SDP offer and answer for one audio stream of G.711 (RFC 4566, RFC 3264), with SRTP keys
exchanged as SDES (RFC 4568) when asked.

Relay offers PCMU (0) and PCMA (8) at 8 kHz with 20 ms packets, and telephone-event (101)
so that a far end may send DTMF (RFC 4733); the answer picks the codec. With SRTP, the
stream carries one `a=crypto` line of the one suite Relay speaks, AES_CM_128_HMAC_SHA1_80:
on an RTP/SAVP stream when SRTP is required, on RTP/AVP when it is only offered (as baresip's
best-effort `srtp` does). The keys are secrets: nothing here logs an SDP.

Each stream has a direction (RFC 3264 §6.1): an answer mirrors the offer's (sendonly ->
recvonly, recvonly -> sendonly, inactive and sendrecv as they are), and a connection address
of 0.0.0.0 (the hold of RFC 2543, which RFC 3264 §8.4 still asks an answerer to take) means
that nothing is to be sent to it. A description that changes a session keeps its `o=` line
and adds one to its version (RFC 3264 §8): `revised`.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from dataclasses import dataclass

CODECS = {0: "PCMU", 8: "PCMA"}
TELEPHONE_EVENT = 101
SRTP_SUITE = "AES_CM_128_HMAC_SHA1_80"
SRTP_KEY_BYTES = 30  # a 128-bit master key and a 112-bit master salt (RFC 4568 §6.2.1)
PLAIN, SECURE = "RTP/AVP", "RTP/SAVP"
SENDRECV, SENDONLY, RECVONLY, INACTIVE = "sendrecv", "sendonly", "recvonly", "inactive"
DIRECTIONS = (SENDRECV, SENDONLY, RECVONLY, INACTIVE)
# RFC 3264 §6.1: "If the offered stream is a=sendonly, the corresponding stream MUST be
# marked a=recvonly or a=inactive in the answer ... a=recvonly ... a=sendonly or
# a=inactive ... a=inactive ... MUST be marked as a=inactive".
MIRROR = {SENDRECV: SENDRECV, SENDONLY: RECVONLY, RECVONLY: SENDONLY, INACTIVE: INACTIVE}
# The connection address of RFC 2543's hold: "neither RTP nor RTCP should be sent to the
# peer" (RFC 3264 §8.4).
HOLD_ADDRESS = "0.0.0.0"  # noqa: S104 - an address read from SDP, never bound


@dataclass(frozen=True)
class Crypto:
    """One `a=crypto` line Relay can use: its tag and the master key and salt."""

    tag: int
    key: bytes

    def line(self) -> str:
        return f"a=crypto:{self.tag} {SRTP_SUITE} inline:{base64.b64encode(self.key).decode()}"


def new_crypto(tag: int = 1) -> Crypto:
    return Crypto(tag=tag, key=secrets.token_bytes(SRTP_KEY_BYTES))


def _crypto(value: str) -> Crypto | None:
    """An `a=crypto` value (RFC 4568 §9.1) of Relay's suite with a plain inline key (no MKI,
    which libsrtp would need told), or None."""
    fields = value.split()
    if len(fields) < 3 or not fields[0].isdigit() or fields[1] != SRTP_SUITE:
        return None
    params = fields[2]
    if not params.startswith("inline:") or ";" in params:  # one key only
        return None
    key_info = params[len("inline:") :].split("|")
    if any(":" in part for part in key_info[1:]):  # an MKI
        return None
    try:
        key = base64.b64decode(key_info[0], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(key) != SRTP_KEY_BYTES:
        return None
    return Crypto(tag=int(fields[0]), key=key)


class SdpError(ValueError):
    pass


@dataclass(frozen=True)
class MediaAnswer:
    host: str
    port: int
    payload_type: int  # 0 (PCMU) or 8 (PCMA)
    telephone_event: int | None = None
    profile: str = PLAIN  # RTP/AVP, or RTP/SAVP
    crypto: Crypto | None = None  # the peer's key, when it offered or answered SRTP
    direction: str = SENDRECV  # the stream's a=sendrecv/sendonly/recvonly/inactive

    @property
    def receives(self) -> bool:
        """Whether this end is to be sent audio: its stream says it receives (sendrecv or
        recvonly), at an address other than 0.0.0.0."""
        return self.direction in (SENDRECV, RECVONLY) and self.host != HOLD_ADDRESS


def answer_direction(media: MediaAnswer) -> str:
    """The direction of Relay's answer to an offer of `media`: the offer's mirrored (RFC 3264
    §6.1). When the offer's address is 0.0.0.0 Relay sends nothing, and its answer says so:
    a mirrored sendrecv becomes recvonly, a mirrored sendonly inactive."""
    direction = MIRROR[media.direction]
    if media.host == HOLD_ADDRESS:
        direction = {SENDRECV: RECVONLY, SENDONLY: INACTIVE}.get(direction, direction)
    return direction


def revised(previous: bytes, new: bytes) -> bytes:
    """A session's next description (RFC 3264 §8): `previous` itself when `new` says the same
    but for its `o=` line ("If the version in the origin line does not increment, the SDP
    MUST be identical"), else `new` with the `o=` line of `previous`, its version one more
    ("the "o=" line of the new SDP MUST be identical to that in the previous SDP, except that
    the version in the origin field MUST increment by one")."""
    old_lines, new_lines = previous.decode().split("\r\n"), new.decode().split("\r\n")
    origin = next((line for line in old_lines if line.startswith("o=")), None)
    if origin is None:
        return new
    rest = [line for line in new_lines if not line.startswith("o=")]
    if rest == [line for line in old_lines if not line.startswith("o=")]:
        return previous
    fields = origin.split(" ")
    fields[2] = str(int(fields[2]) + 1)
    return "\r\n".join(
        " ".join(fields) if line.startswith("o=") else line for line in new_lines
    ).encode()


def offer(
    *,
    address: str,
    port: int,
    payload_types=(0, 8),
    crypto: Crypto | None = None,
    profile: str = PLAIN,
) -> bytes:
    """An offer of one sendrecv audio stream on `address`:`port` (with `crypto`, our SRTP key,
    on `profile`)."""
    return _description(
        address=address,
        port=port,
        payload_types=payload_types,
        telephone_event=TELEPHONE_EVENT,
        crypto=crypto,
        profile=profile,
    )


def answer(*, address: str, port: int, media: MediaAnswer, crypto: Crypto | None = None) -> bytes:
    """The answer to an offer (parsed by parse_offer): the codec it chose, and
    telephone-event at the offer's payload type when the offer has it, so that the caller
    may send DTMF (RFC 4733), in the direction that mirrors the offer's (answer_direction).
    With `crypto` (our key) SRTP is accepted: the answer's crypto line has the offer's tag
    (RFC 4568 §7.1.2) and the stream the offer's profile."""
    if crypto is not None and media.crypto is not None:
        crypto = Crypto(tag=media.crypto.tag, key=crypto.key)
    return _description(
        address=address,
        port=port,
        payload_types=(media.payload_type,),
        telephone_event=media.telephone_event,
        crypto=crypto,
        profile=media.profile,
        direction=answer_direction(media),
    )


def _description(
    *,
    address: str,
    port: int,
    payload_types,
    telephone_event,
    crypto=None,
    profile=PLAIN,
    direction=SENDRECV,
) -> bytes:
    session = secrets.randbelow(2**31)
    ip = "IP6" if ":" in address else "IP4"
    events = () if telephone_event is None else (telephone_event,)
    formats = " ".join(str(pt) for pt in (*payload_types, *events))
    lines = [
        "v=0",
        f"o=relay {session} {int(time.time())} IN {ip} {address}",
        "s=relay",
        f"c=IN {ip} {address}",
        "t=0 0",
        f"m=audio {port} {profile} {formats}",
        *(f"a=rtpmap:{pt} {CODECS[pt]}/8000" for pt in payload_types),
        *(f"a=rtpmap:{pt} telephone-event/8000" for pt in events),
        *(f"a=fmtp:{pt} 0-16" for pt in events),
        "a=ptime:20",
        f"a={direction}",
        *((crypto.line(),) if crypto is not None else ()),
    ]
    return ("\r\n".join(lines) + "\r\n").encode()


def parse_answer(body: bytes, *, offered=(0, 8), prefer: int | None = None) -> MediaAnswer:
    """Where to send audio and in which codec, from the far end's SDP (an answer to our
    offer, or an offer to answer: the first of its codecs that Relay speaks, or `prefer`
    when it is one of them: a re-INVITE keeps the call's codec when it can), and in which
    direction (a media-level attribute over a session-level one, sendrecv by default)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SdpError("SDP is not UTF-8") from exc
    session_host = media_host = None
    port, formats, events, profile, crypto = None, [], None, PLAIN, None
    session_direction = media_direction = None
    in_audio = False
    for line in text.replace("\r\n", "\n").split("\n"):
        kind, _, value = line.strip().partition("=")
        if kind == "m":
            fields = value.split()
            in_audio = len(fields) >= 4 and fields[0] == "audio" and port is None
            if in_audio:
                if not fields[1].isdigit():
                    raise SdpError("bad media port")
                port = int(fields[1])
                profile = fields[2].upper()
                formats = [int(f) for f in fields[3:] if f.isdigit()]
        elif kind == "c":
            host = value.split()[-1] if value.split() else None
            if port is None:
                session_host = host
            elif in_audio:
                media_host = host
        elif kind == "a" and in_audio and value.lower().startswith("rtpmap:"):
            pt, _, name = value[7:].partition(" ")
            if name.lower().startswith("telephone-event") and pt.isdigit():
                events = int(pt)
        elif kind == "a" and in_audio and value.lower().startswith("crypto:") and not crypto:
            crypto = _crypto(value[7:])
        elif kind == "a" and value.strip().lower() in DIRECTIONS:
            if port is None:
                session_direction = value.strip().lower()
            elif in_audio:
                media_direction = value.strip().lower()
    host = media_host or session_host
    if port is None or not host:
        raise SdpError("no audio stream")
    if profile not in (PLAIN, SECURE):
        raise SdpError(f"unsupported media profile {profile[:20]}")
    if port == 0:
        raise SdpError("the audio stream is refused (port 0)")
    chosen = next((pt for pt in formats if pt in offered), None)
    if chosen is None:
        raise SdpError("no common codec")
    if prefer is not None and prefer in formats and prefer in offered:
        chosen = prefer
    return MediaAnswer(
        host=host,
        port=port,
        payload_type=chosen,
        telephone_event=events,
        profile=profile,
        crypto=crypto,
        direction=media_direction or session_direction or SENDRECV,
    )


parse_offer = parse_answer
