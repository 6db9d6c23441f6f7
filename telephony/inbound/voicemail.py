"""What an answered call to a number hears: the greeting, a beep, and the caller's message
recorded until they hang up, VOICEMAIL_MAX_SECONDS or VOICEMAIL_SILENCE_SECONDS of silence;
or, after `*` during the greeting, the mailbox (telephony.inbound.mailbox)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.files.base import ContentFile

from core.recordings import recordings_storage
from telephony.inbound.line import Line
from telephony.inbound.mailbox import Mailbox
from telephony.sip.rtp import wav_from_g711
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech

DEFAULT_GREETING = (
    "The person you are calling is not available. Please leave a message after the tone."
)
SILENCE_KEPT = 0.5  # seconds of the silence that ended a message kept at its end


class Voicemail:
    """What an answered call hears: the greeting, then either the beep and the recording,
    or (after `*`) the mailbox."""

    def __init__(self, call: InboundDialog, speech: Speech, db: Callable, number) -> None:
        self.line = Line(call, speech)
        self.call, self.speech, self.db, self.number = call, speech, db, number
        self.stream = call.stream

    async def run(self) -> dict:
        """Play the greeting; the recording's fields for the record ({} when none)."""
        line = self.line
        greeting = await line.speech(self.number.greeting or DEFAULT_GREETING)
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

    async def _record(self) -> dict:
        loop = asyncio.get_running_loop()
        stream = self.stream
        stream.record()
        started = loop.time()
        stop_at = started + settings.VOICEMAIL_MAX_SECONDS
        silence = settings.VOICEMAIL_SILENCE_SECONDS
        while not self.call.ended.is_set():
            now = loop.time()
            if now >= stop_at or now - stream.last_sound >= silence:
                break
            with contextlib.suppress(TimeoutError):
                wait = min(0.2, stop_at - now)
                await asyncio.wait_for(self.call.ended.wait(), wait)
        audio = bytes(stream.recording or b"")
        stream.recording = None
        if stream.last_sound <= started:
            return {}  # nothing but silence: no message
        if loop.time() - stream.last_sound >= silence:  # ended by silence: drop most of it
            keep = int((stream.last_sound - started + SILENCE_KEPT) * 8000)
            audio = audio[:keep]
        wav = wav_from_g711(audio, stream.payload_type)
        name = await asyncio.to_thread(
            recordings_storage().save, f"{uuid.uuid4().hex}.wav", ContentFile(wav)
        )
        return {"recording": name, "recording_seconds": len(audio) / 8000}
