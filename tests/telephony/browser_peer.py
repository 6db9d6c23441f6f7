"""aiortc as a browser, for the tests of calls from and to the browser (issue 43)."""

from __future__ import annotations

import asyncio

from aiortc import RTCPeerConnection, RTCSessionDescription

from telephony.webrtc.leg import RelayedAudio

DEADLINE = 20
PHONE_SAYS = bytes(range(0, 160))  # a 20 ms G.711 frame each side can tell from the other's
BROWSER_SAYS = bytes(range(95, 255))


async def until(condition, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Browser:
    """aiortc as a browser: it offers audio (opus, G.722, PCMU, PCMA, as it does), sends what
    is pushed to its track, and keeps the RTP payloads it receives."""

    def __init__(self) -> None:
        self.pc = RTCPeerConnection()
        self.track = RelayedAudio()
        self.pc.addTrack(self.track)
        self.received: list[tuple[int, bytes]] = []

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return self.pc.localDescription.sdp

    async def take(self, answer: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))

        async def keep(packet, arrival_time_ms):
            self.received.append((packet.payload_type, packet.payload))

        self.pc.getTransceivers()[0].receiver._handle_rtp_packet = keep


async def an_offer() -> str:
    """A browser's offer, as aiortc makes it (its candidates gathered)."""
    browser = Browser()
    try:
        return await browser.offer()
    finally:
        await browser.pc.close()
