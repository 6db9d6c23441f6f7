"""sip_browser_50's browsers (issue 43): aiortc as `--calls` browser tabs of one user, each
placing a call from the browser (`rtc_offer` on one socket) to SIPp, which answers and echoes.

Run as its own process, so that its CPU is not the agent's:

    python bench/browser_load.py --ws ws://127.0.0.1:PORT/ws?token=JWT --calls 50 \\
        --talk 10 --out result.json

Each tab offers PCMU alone (as the agent answers a browser that offers G.711), waits for its
call to be answered, then sends a 20 ms packet every 20 ms for `--talk` seconds, paced by the
clock (as a caller talks from its answer: the tabs are placed together, so their calls
overlap). A packet's payload starts with the tab's index and the packet's number, so the echo
that comes back names its packet: the round trip (tab -> agent -> SIPp -> agent -> tab) is
timed per packet, and a packet sent and never heard back is lost. Then each tab closes its
connection (a hang-up) and waits for its call's terminal status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import struct
import sys
import time
from pathlib import Path

from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.tab_process import tab_main  # noqa: E402 - after the path
from telephony.webrtc.leg import RelayedAudio  # noqa: E402 - after the path

TERMINAL = {"completed", "busy", "no_answer", "failed", "canceled"}
DRAIN_SECONDS = 1.0  # after the last packet, echoes still on their way are waited for
FILLER = b"\xff" * 152  # PCMU silence after the 8-byte tag


class Tab:
    def __init__(self, index: int, stamp: int) -> None:
        self.index = index
        self.call_id = f"bb-{stamp}-{index}"
        self.to = f"+44207946{100 + index:04d}"
        self.pc = RTCPeerConnection()
        self.track = RelayedAudio()
        self.pc.addTrack(self.track)
        self.pc.getTransceivers()[0].setCodecPreferences(
            [c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType == "audio/PCMU"]
        )
        self.frames: asyncio.Queue[dict] = asyncio.Queue()
        self.sent: dict[int, float] = {}
        self.rtts: list[float] = []
        self.foreign = 0  # echoes of another tab's packets (a crossed bridge)
        self.statuses: list[str] = []
        self.setup_s = float("nan")

    async def heard(self, packet, arrival_time_ms) -> None:
        now = time.perf_counter()
        if len(packet.payload) < 8:
            return
        index, number = struct.unpack("!II", packet.payload[:8])
        if index != self.index:
            self.foreign += 1
            return
        sent = self.sent.get(number)
        if sent is not None:
            self.rtts.append((now - sent) * 1000)

    async def frame(self, kind: str, timeout: float = 60) -> dict:
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.frames.get()
                if frame["type"] == "call_status":
                    self.statuses.append(frame["status"])
                if frame["type"] == kind or frame.get("status") in TERMINAL:
                    return frame

    async def answered(self) -> None:
        while "in_progress" not in self.statuses:
            frame = await self.frame("call_status")
            if frame.get("status") in TERMINAL:
                raise RuntimeError(f"{self.call_id} ended before it was answered: {frame}")

    async def run(self, ws, talk: float) -> None:
        begun = time.perf_counter()
        await self.pc.setLocalDescription(await self.pc.createOffer())
        offer = self.pc.localDescription.sdp
        await ws.send(
            json.dumps({"type": "rtc_offer", "callId": self.call_id, "to": self.to, "sdp": offer})
        )
        answer = await self.frame("rtc_answer")
        if answer["type"] != "rtc_answer":
            raise RuntimeError(f"{self.call_id}: no answer: {answer}")
        await self.pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], "answer"))
        self.pc.getTransceivers()[0].receiver._handle_rtp_packet = self.heard
        await self.answered()
        self.setup_s = time.perf_counter() - begun
        loop = asyncio.get_running_loop()
        first = loop.time()
        for number in range(round(talk / 0.02)):
            await asyncio.sleep(max(0.0, first + number * 0.02 - loop.time()))
            self.sent[number] = time.perf_counter()
            self.track.push(struct.pack("!II", self.index, number) + FILLER)
        await asyncio.sleep(DRAIN_SECONDS)
        await self.pc.close()  # the tab hangs up
        while not self.statuses or self.statuses[-1] not in TERMINAL:
            await self.frame("call_status")


async def main_async(args) -> dict:
    stamp = int(time.time())
    tabs = [Tab(i, stamp) for i in range(args.calls)]
    by_call = {tab.call_id: tab for tab in tabs}
    async with connect(args.ws, max_size=2**22) as ws:

        async def read() -> None:
            async for raw in ws:
                frame = json.loads(raw)
                tab = by_call.get(frame.get("callId"))
                if tab is not None:
                    tab.frames.put_nowait(frame)

        reader = asyncio.ensure_future(read())
        started = time.perf_counter()
        results = await asyncio.gather(
            *(tab.run(ws, args.talk) for tab in tabs), return_exceptions=True
        )
        wall = time.perf_counter() - started
        reader.cancel()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "calls": args.calls,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "errors": [repr(r) for r in results if isinstance(r, BaseException)],
        "tabs": [
            {
                "callId": tab.call_id,
                "sent": len(tab.sent),
                "heard": len(tab.rtts),
                "foreign": tab.foreign,
                "rtt_ms": tab.rtts,
                "setup_s": tab.setup_s,
                "statuses": tab.statuses,
            }
            for tab in tabs
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--talk", type=float, required=True)
    tab_main(parser, main_async)


if __name__ == "__main__":
    main()
