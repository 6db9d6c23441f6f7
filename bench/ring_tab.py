"""sip_ring_group's browser (issue 57): one console tab of the ring group's member, aiortc,
with its phone on, so that every call to the number rings it (`incoming_call` with
`ringBrowser`).

Run as its own process, so that its CPU is not the agent's:

    python bench/ring_tab.py --ws ws://127.0.0.1:PORT/ws?token=JWT --rings 50 \\
        --answer-suffix 4 --ready ready.flag --deadline 120 --out tab.json

It writes `--ready` once Relay has switched its phone on. A ring whose caller's number ends in
`--answer-suffix` (none: it answers no ring) the tab answers as the console does: an
`rtc_offer` (PCMU alone, as a browser that offers G.711) naming the ring, the agent's
`rtc_answer`, ICE and DTLS-SRTP; it then echoes every packet it hears (as the SIPp phones
echo) until Relay's `rtc_hangup` (`ended`). Any other ring it lets ring until Relay's
`rtc_hangup` says why it is over (`answered_elsewhere` when a phone took the call). It exits
once `--rings` rings are over, at `--deadline` seconds, or when the harness stops it
(SIGTERM): it writes its result in each case, with the rings that never ended (`stopped` says
the harness stopped it), so that a ring Relay never ended is counted, not lost with the result.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import signal
import sys
import time
from pathlib import Path

from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.tab_process import tab_main  # noqa: E402 - after the path
from telephony.webrtc.leg import RelayedAudio  # noqa: E402 - after the path


class Answer:
    """One ring this tab answers: its connection, echoing what it hears."""

    def __init__(self, ring: str) -> None:
        self.ring = ring
        self.pc = RTCPeerConnection()
        self.track = RelayedAudio()
        self.pc.addTrack(self.track)
        self.pc.getTransceivers()[0].setCodecPreferences(
            [c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType == "audio/PCMU"]
        )
        self.heard = 0
        self.begun = time.perf_counter()
        self.setup_s = float("nan")

    async def echo(self, packet, arrival_time_ms) -> None:
        if self.heard == 0:
            self.setup_s = time.perf_counter() - self.begun
        self.heard += 1
        self.track.push(bytes(packet.payload))

    async def offer(self) -> dict:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return {"type": "rtc_offer", "ring": self.ring, "sdp": self.pc.localDescription.sdp}

    async def answered(self, sdp: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))
        self.pc.getTransceivers()[0].receiver._handle_rtp_packet = self.echo


async def main_async(args) -> dict:
    rung: dict[str, str] = {}  # ring -> the caller's number
    over: dict[str, str] = {}  # ring -> the reason Relay gave
    answers: dict[str, Answer] = {}
    errors: list[str] = []
    stopped = asyncio.Event()  # SIGTERM: the harness stops this tab
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)

    async def frames(ws) -> None:
        async for raw in ws:
            frame = json.loads(raw)
            kind, ring = frame.get("type"), frame.get("ring")
            if kind == "phone" and frame.get("on") is True:
                Path(args.ready).write_text("on\n")
            elif kind == "incoming_call" and frame.get("ringBrowser"):
                rung[ring] = frame.get("caller_num", "")
                if args.answer_suffix and rung[ring].endswith(args.answer_suffix):
                    answers[ring] = Answer(ring)
                    await ws.send(json.dumps(await answers[ring].offer()))
            elif kind == "rtc_answer" and ring in answers:
                await answers[ring].answered(frame["sdp"])
            elif kind == "rtc_hangup" and ring:
                over[ring] = frame.get("reason", "")
                if ring in answers:
                    await answers[ring].pc.close()
                if len(over) >= args.rings:
                    return
            elif kind == "error":
                errors.append(json.dumps(frame)[:300])

    async with connect(args.ws, max_size=2**22) as ws:
        await ws.send(json.dumps({"type": "phone", "on": True}))
        started = time.perf_counter()
        reading, stopping = asyncio.create_task(frames(ws)), asyncio.create_task(stopped.wait())
        await asyncio.wait((reading, stopping), timeout=args.deadline,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        for task in (reading, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        wall = time.perf_counter() - started
    for answer in answers.values():
        await answer.pc.close()
    reasons: dict[str, int] = {}
    for reason in over.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "rung": len(rung),
        "over": len(over),
        "reasons": reasons,
        "answered": sorted(a.ring for a in answers.values() if a.heard),
        "offered": len(answers),
        "heard": sum(a.heard for a in answers.values()),
        "setup_s": [a.setup_s for a in answers.values() if a.heard],
        "still_ringing": len(set(rung) - set(over)),
        # the callers of the rings that never ended (a few): whose calls they were
        "never_ended": sorted(rung[ring] for ring in set(rung) - set(over))[:10],
        "stopped": stopped.is_set(),
        "errors": errors,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rings", type=int, required=True)
    parser.add_argument("--answer-suffix", default="")
    parser.add_argument("--ready", required=True)
    parser.add_argument("--deadline", type=float, required=True)
    tab_main(parser, main_async)


if __name__ == "__main__":
    main()
