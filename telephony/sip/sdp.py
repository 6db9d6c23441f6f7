"""SDP offer and answer for one audio stream of G.711 (RFC 4566, RFC 3264).

Relay offers PCMU (0) and PCMA (8) at 8 kHz with 20 ms packets, and telephone-event (101)
so that a far end may send DTMF (RFC 4733); the answer picks the codec.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

CODECS = {0: "PCMU", 8: "PCMA"}
TELEPHONE_EVENT = 101


class SdpError(ValueError):
    pass


@dataclass(frozen=True)
class MediaAnswer:
    host: str
    port: int
    payload_type: int  # 0 (PCMU) or 8 (PCMA)
    telephone_event: int | None = None


def offer(*, address: str, port: int, payload_types=(0, 8)) -> bytes:
    """An offer of one sendrecv audio stream on `address`:`port`."""
    return _description(
        address=address, port=port, payload_types=payload_types, telephone_event=TELEPHONE_EVENT
    )


def answer(*, address: str, port: int, media: MediaAnswer) -> bytes:
    """The answer to an offer (parsed by parse_offer): the codec it chose, and
    telephone-event at the offer's payload type when the offer has it, so that the caller
    may send DTMF (RFC 4733)."""
    return _description(
        address=address,
        port=port,
        payload_types=(media.payload_type,),
        telephone_event=media.telephone_event,
    )


def _description(*, address: str, port: int, payload_types, telephone_event) -> bytes:
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
        f"m=audio {port} RTP/AVP {formats}",
        *(f"a=rtpmap:{pt} {CODECS[pt]}/8000" for pt in payload_types),
        *(f"a=rtpmap:{pt} telephone-event/8000" for pt in events),
        *(f"a=fmtp:{pt} 0-16" for pt in events),
        "a=ptime:20",
        "a=sendrecv",
    ]
    return ("\r\n".join(lines) + "\r\n").encode()


def parse_answer(body: bytes, *, offered=(0, 8)) -> MediaAnswer:
    """Where to send audio and in which codec, from the far end's SDP (an answer to our
    offer, or an offer to answer: the first of its codecs that Relay speaks)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SdpError("SDP is not UTF-8") from exc
    session_host = media_host = None
    port, formats, events = None, [], None
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
    host = media_host or session_host
    if port is None or not host:
        raise SdpError("no audio stream")
    chosen = next((pt for pt in formats if pt in offered), None)
    if chosen is None:
        raise SdpError("no common codec")
    return MediaAnswer(host=host, port=port, payload_type=chosen, telephone_event=events)


parse_offer = parse_answer
