"""What an answered call to a number hears: the greeting (a closed number's closed greeting,
else the one the owner recorded by phone, else the text spoken), a beep, and the caller's
message recorded until they hang up, VOICEMAIL_MAX_SECONDS or VOICEMAIL_SILENCE_SECONDS of
silence; or, after `*` during the greeting, the mailbox (telephony.inbound.mailbox)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from django.conf import settings

from telephony.inbound.line import Line
from telephony.inbound.mailbox import Mailbox
from telephony.recording import Recording, recording_save
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech

DEFAULT_GREETING = (
    "The person you are calling is not available. Please leave a message after the tone."
)


class Voicemail:
    """What an answered call hears: the greeting, then either the beep and the recording,
    or (after `*`) the mailbox."""

    def __init__(
        self, call: InboundDialog, speech: Speech, db: Callable, number, *, greeting: str = ""
    ) -> None:
        self.line = Line(call, speech)
        self.call, self.speech, self.db, self.number = call, speech, db, number
        # Spoken in place of the number's greeting (a closed number's closed greeting).
        self.greeting = greeting
        self.stream = call.stream

    async def run(self) -> dict:
        """Play the greeting; the recording's fields for the record ({} when none)."""
        line = self.line
        greeting = await self._greeting()
        star = asyncio.ensure_future(line.key_pressed("*"))
        try:
            played = await line.play(greeting, also=star)
        finally:
            star.cancel()
        if star.done() and not star.cancelled():
            await Mailbox(line, db=self.db, number=self.number).run()
            return {}
        if not played or not await line.play(self.speech.tone()[self.stream.payload_type]):
            return {}
        return await self._record()

    async def _greeting(self) -> bytes:
        """The greeting given for this call (a closed number's) spoken; else the recorded
        greeting, or when there is none (or its file cannot be played) the text greeting
        spoken, or the default."""
        if self.greeting:
            return await self.line.speech(self.greeting)
        if self.number.greeting_recording:
            recorded = await self.line.stored(self.number.greeting_recording)
            if recorded:
                return recorded
        return await self.line.speech(self.number.greeting or DEFAULT_GREETING)

    async def _record(self) -> dict:
        recording = Recording(
            self.stream,
            max_seconds=settings.VOICEMAIL_MAX_SECONDS,
            silence=settings.VOICEMAIL_SILENCE_SECONDS,
        )
        while not self.call.ended.is_set() and (left := recording.left()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.call.ended.wait(), min(0.2, left))
        audio = recording.take(trim=False)
        if audio is None:
            return {}  # nothing but silence: no message
        name, seconds = await recording_save(audio, self.stream.payload_type)
        return {"recording": name, "recording_seconds": seconds}
