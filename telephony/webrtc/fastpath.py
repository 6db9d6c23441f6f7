"""RTP between the bridge and a browser's SRTP, without aiortc's per-packet machinery.

Once a browser leg is connected (ICE and DTLS done, the SRTP keys set), each G.711 packet
crosses it on a short path of plain calls. What arrives from the browser is taken off the ICE
connection's sockets as it is read (before aioice tries it as STUN): SRTP unprotected with the
DTLS transport's keys, the RTP header read in place, the payload handed to the bridge. What
goes to the browser is stamped with the sender's own SSRC (the one the answer announced),
protected, and written to the nominated candidate pair's socket. aiortc's path for the same
packet went through a queue and a task each way, built a packet object with its header
extensions, and read the clock twice; the agent's CPU per browser call was over twice a
SIP-to-SIP bridge's (docs/benchmarks.md, sip_browser_50). STUN, DTLS and RTCP still take
aiortc's and aioice's own paths, as does everything while the path is not open.

This module is the browser leg's one edge to aiortc's and aioice's internals (`_rx_srtp`,
`_tx_srtp`, `_connection`, `_nominated`, `_protocols`, and the receiver's
`_handle_rtp_packet`, which hear_before_decoder replaces): aiortc is pinned to its minor
release (aioice too), tests/platform/edges.py checks each name, and `open()` returns None (the
leg keeps aiortc's path) when any is missing. WEBRTC_FAST_PATH=false never opens it.
"""

from __future__ import annotations

import logging
import os
import struct

import pylibsrtp

logger = logging.getLogger(__name__)

RTP = struct.Struct("!BBHII")


def hear_before_decoder(receiver, heard) -> None:
    """Hand every RTP packet aiortc's `receiver` gets to `heard(packet, arrival_time_ms)`, in
    place of its own handler: before its jitter buffer and decoder, which no public path
    offers (the leg relays G.711 as it comes and decodes only Opus itself)."""
    receiver._handle_rtp_packet = heard


class FastPath:
    """One connected leg's short path: `send(payload)` to the browser; packets from it go to
    `heard(payload_type, marker, sequence, timestamp, ssrc, payload)`."""

    def __init__(self, dtls, ice, sender_ssrc: int, payload_type: int, heard) -> None:
        self.dtls, self.ice, self.heard = dtls, ice, heard
        self.ssrc, self.payload_type = sender_ssrc, payload_type
        self.sequence, self.timestamp = struct.unpack("!HI", os.urandom(6))
        self.marker = 0x80  # on the first packet of the stream
        # Each local candidate's socket: SRTP is read here, the rest (STUN, DTLS, SRTCP) as
        # aioice reads it.
        self.hooked = [(p, p.datagram_received) for p in ice._protocols]
        for protocol, fallback in self.hooked:
            protocol.datagram_received = self._hook(fallback)

    @classmethod
    def open(cls, transceiver, payload_type: int, heard) -> FastPath | None:
        try:
            dtls = transceiver.receiver.transport
            ice = dtls.transport._connection
            if dtls._rx_srtp is None or dtls._tx_srtp is None or not ice._nominated:
                return None
            return cls(dtls, ice, transceiver.sender._ssrc, payload_type, heard)
        except AttributeError as exc:  # another aiortc: its own path stays
            logger.warning("the browser leg's fast RTP path is unavailable (%s)", exc)
            return None

    def close(self) -> None:
        for protocol, fallback in self.hooked:
            protocol.datagram_received = fallback
        self.hooked = []

    def _hook(self, fallback):
        def datagram_received(data: bytes, addr) -> None:
            if len(data) < 12 or not 127 < data[0] < 192 or 192 <= data[1] <= 208:
                fallback(data, addr)  # STUN, DTLS or SRTCP
            else:
                self._received(data)

        return datagram_received

    def send(self, payload: bytes) -> None:
        """One G.711 frame to the browser, 20 ms after the last."""
        pair = self.ice._nominated.get(1)
        if pair is None:
            return
        header = RTP.pack(0x80, self.marker | self.payload_type, self.sequence, self.timestamp,
                          self.ssrc)  # fmt: skip
        self.marker = 0
        self.sequence = (self.sequence + 1) & 0xFFFF
        self.timestamp = (self.timestamp + len(payload)) & 0xFFFFFFFF
        try:
            protected = self.dtls._tx_srtp.protect(header + payload)
        except pylibsrtp.Error:
            return
        pair.protocol.transport.sendto(protected, pair.remote_addr)

    def _received(self, data: bytes) -> None:
        """One SRTP datagram from the browser."""
        try:
            rtp = self.dtls._rx_srtp.unprotect(data)
        except pylibsrtp.Error:  # not this tab's keys, or a replay: dropped, as aiortc does
            return
        first, second, sequence, timestamp, ssrc = RTP.unpack_from(rtp)
        start, end = 12 + 4 * (first & 0x0F), len(rtp)
        if first & 0x10:  # a header extension (its length in 32-bit words)
            if end < start + 4:
                return
            start += 4 + 4 * struct.unpack_from("!H", rtp, start + 2)[0]
        if first & 0x20:  # padding, its count in the last byte
            end -= rtp[-1]
        if start > end:
            return
        self.heard(second & 0x7F, second & 0x80, sequence, timestamp, ssrc, rtp[start:end])
