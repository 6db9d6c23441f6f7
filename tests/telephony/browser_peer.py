"""aiortc as a browser, for the tests of calls from and to the browser (issue 43)."""

from __future__ import annotations

import asyncio
import json

from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription

from calls.states import TERMINAL_STATES
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
    """aiortc as a browser: it offers audio (opus, G.722, PCMU, PCMA, as it does, or only the
    `codecs` given, by MIME type), sends what is pushed to its track, and keeps the RTP
    payloads it receives."""

    def __init__(self, codecs: tuple[str, ...] = ()) -> None:
        self.pc = RTCPeerConnection()
        self.track = RelayedAudio()
        self.pc.addTrack(self.track)
        if codecs:
            self.pc.getTransceivers()[0].setCodecPreferences(
                [c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType in codecs]
            )
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


# --- what a tab reads on its socket ---
async def next_frame(ws, call_id: str, kind: str, timeout: float = 30) -> dict:
    """The next frame of `kind` about `call_id` (others are passed over)."""
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") == call_id and frame["type"] == kind:
                return frame


async def status_frames(ws, call_id: str, timeout: float = 60) -> list[str]:
    """Its call_status frames until a terminal one."""
    seen = []
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") == call_id and frame["type"] == "call_status":
                seen.append(frame["status"])
                if frame["status"] in TERMINAL_STATES:
                    return seen


async def until_status(ws, call_id: str, status: str) -> None:
    async with asyncio.timeout(30):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") == call_id and frame.get("status") == status:
                return


async def call_from_the_browser(ws, browser: Browser, call_id: str, to: str, **fields) -> None:
    """Place a call from `browser` on socket `ws` (`rtc_offer`, with `fields` such as `from`),
    take the agent's answer, and return once the callee has answered and the tab's
    connection is up."""
    offer = await browser.offer()
    frame = {"type": "rtc_offer", "callId": call_id, "to": to, "sdp": offer, **fields}
    await ws.send(json.dumps(frame))
    await browser.take((await next_frame(ws, call_id, "rtc_answer"))["sdp"])
    await until_status(ws, call_id, "in_progress")
    await until(lambda: browser.pc.connectionState == "connected", "the connection")
