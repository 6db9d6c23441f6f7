"""Machine detection on an answered outbound call (issue 56): the call's `talk` when it asked
for `machineDetection`. What the callee sends is decoded from G.711 as it arrives and fed to
the detector (telephony.machine_detection); its decision is reported (`answeredBy`) within
DECIDE_SECONDS of the answer, or `unknown` if the far end sent too little to decide.

A message (`audio`):
- is spoken at once, on the answer, whatever the mode: a person hears it without a silence
  while the detector listens (docs/decisions.md, issue 56);
- `detect`: goes on as it is; the call hangs up once the message has been said and the
  decision reported;
- `leave_message`: on `machine`, what was said over the greeting is cut, and the message is
  said again, whole, at the beep's end, or once the greeting has ended and a second of
  silence passed (at SPEAK_CAP_SECONDS after the answer at the latest); on `fax` the call
  hangs up (`ended_by` "fax": completed, reason fax); on `human` or `unknown` it goes on.

A script (`then`) starts once the decision is made, so that its hooks carry `answeredBy`
(and Twilio's `AnsweredBy`): with `leave_message`, after the beep on a machine, never on a fax.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from telephony.machine_detection import (
    DECIDE_SECONDS,
    FAX,
    MACHINE,
    SPEAK_CAP_SECONDS,
    UNKNOWN,
    Decision,
    MachineDetector,
)
from telephony.sip.rtp import pcm_from_g711
from voiceapps.answered_by import twilio_answered_by

logger = logging.getLogger(__name__)

LEAVE_MESSAGE = "leave_message"
# The far end's audio is late or lost: the decision waits this much past DECIDE_SECONDS of
# wall time at most, then is `unknown`.
LATE_SECONDS = 0.25
FAX_REASON = "fax"  # the reason of a call hung up on a fax (leave_message)

Detected = Callable[[Decision], Awaitable[None]]


class DetectingTalk:
    """The talk of an outbound call with machine detection (`mode`: detect or
    leave_message): speaks `audio` (G.711 by payload type) or runs `then` (a script's talk,
    with `identity`, the body of its hooks, to add `answeredBy` to), and hands the decision
    to `detected` (which writes it). `label` names the call in logs."""

    def __init__(
        self,
        *,
        mode: str,
        detected: Detected,
        label: str,
        audio: dict[int, bytes] | None = None,
        then=None,
        identity: dict | None = None,
    ) -> None:
        self.mode, self.detected, self.label = mode, detected, label
        self.audio, self.then, self.identity = audio or {}, then, identity
        self.detector = MachineDetector()
        self.decision: asyncio.Future | None = None
        self.speak: asyncio.Future | None = None
        self.ended_by_detection = ""

    @property
    def ended_by(self) -> str:
        if self.ended_by_detection:
            return self.ended_by_detection
        return getattr(self.then, "ended_by", "")

    def _heard(self, payload: bytes, payload_type: int) -> None:
        """One RTP packet's audio (telephony.sip.rtp's `on_audio`), fed to the detector."""
        pcm = pcm_from_g711(payload, payload_type)
        if pcm is None:
            return
        detector = self.detector
        decision = detector.feed(pcm)
        if decision is not None and not self.decision.done():
            self.decision.set_result(decision)
        if detector.speak_at is not None and not self.speak.done():
            self.speak.set_result(detector.speak_reason)

    async def __call__(self, call) -> None:
        loop = asyncio.get_running_loop()
        self.decision, self.speak = loop.create_future(), loop.create_future()
        answered = time.monotonic()
        stream = call.stream
        stream.on_audio = self._heard
        message = self.audio.get(stream.payload_type, b"")
        player = asyncio.ensure_future(stream.play(message)) if self.then is None else None
        report: asyncio.Future | None = None
        try:
            decision = await self._decision()
            report = asyncio.ensure_future(self._report(decision))
            leave = self.mode == LEAVE_MESSAGE
            if leave and decision.answered_by == FAX:
                self.ended_by_detection = FAX_REASON
                return
            speak_reason = ""
            if leave and decision.answered_by == MACHINE:
                if player is not None:
                    player.cancel()  # said over the greeting: said again after it
                speak_reason = await self._greeting_end(answered)
                logger.info(
                    "%s: a machine's greeting ended (%s) %.2f s into its audio, %.2f s after the "
                    "answer",
                    self.label,
                    speak_reason,
                    self.detector.speak_at or 0.0,
                    time.monotonic() - answered,
                )
            if self.then is not None:
                if self.identity is not None:
                    self.identity["answeredBy"] = decision.answered_by
                    self.identity["AnsweredBy"] = twilio_answered_by(
                        decision.answered_by, message_end=speak_reason
                    )
                await self.then(call)
            elif speak_reason:
                await stream.play(message)
            else:
                await player
        finally:
            stream.on_audio = None
            if player is not None:
                player.cancel()
            if report is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(report)

    async def _decision(self) -> Decision:
        """The detector's decision, or `unknown` once DECIDE_SECONDS (and LATE_SECONDS) of
        wall time have passed without one: a far end that sends nothing, or little."""
        try:
            return await asyncio.wait_for(
                asyncio.shield(self.decision), DECIDE_SECONDS + LATE_SECONDS
            )
        except TimeoutError:
            decision = Decision(UNKNOWN, DECIDE_SECONDS, "no_audio")
            self.detector.decision = decision
            return decision

    async def _greeting_end(self, answered: float) -> str:
        """After `machine`: wait for the beep's end, or the greeting's end and a second of
        silence, by SPEAK_CAP_SECONDS after the answer at the latest; which it was."""
        left = SPEAK_CAP_SECONDS - (time.monotonic() - answered)
        try:
            return await asyncio.wait_for(asyncio.shield(self.speak), max(0.0, left))
        except TimeoutError:
            return "cap"

    async def _report(self, decision: Decision) -> None:
        try:
            await self.detected(decision)
        except Exception:
            logger.exception("%s: who answered was not written", self.label)
