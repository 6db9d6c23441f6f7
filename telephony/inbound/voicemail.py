"""What an answered call to a number hears: the greeting (a closed number's closed greeting,
recorded by phone or else spoken, if it has one; else the one the owner recorded by phone,
else the text spoken), a beep, and the caller's
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
        self, call: InboundDialog, speech: Speech, db: Callable, number, *, closed=None
    ) -> None:
        self.line = Line(call, speech)
        self.call, self.speech, self.db, self.number = call, speech, db, number
        # A closed number's hours (virtual_numbers.hours.Hours): their closed greeting, if
        # any, in place of the number's greeting.
        self.closed = closed
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
        """A closed number's closed greeting: recorded, or spoken. Else (or when it has none)
        the recorded greeting; when there is none (or a file cannot be played) the text
        greeting spoken, or the default."""
        closed = self.closed
        if closed is not None and (
            recorded := await self._recorded(closed.closed_greeting_recording)
        ):
            return recorded
        if closed is not None and closed.closed_greeting:
            return await self.line.speech(closed.closed_greeting)
        if recorded := await self._recorded(self.number.greeting_recording):
            return recorded
        return await self.line.speech(self.number.greeting or DEFAULT_GREETING)

    async def _recorded(self, name: str) -> bytes | None:
        """The recorded greeting `name` as the call plays it; None for none ("") or a file
        that cannot be played."""
        return await self.line.stored(name) if name else None

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
