"""The line of an answered inbound call, as voicemail and the mailbox use it: audio played
until it ends or the call does, text spoken through the speech cache, and the keys the caller
presses (RFC 4733), one queue of them."""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from core.recordings import recordings_storage
from telephony.sip.race import race, won
from telephony.sip.uas import InboundDialog
from telephony.speech import Speech, SpeechError

logger = logging.getLogger(__name__)


class Line:
    def __init__(self, call: InboundDialog, speech: Speech) -> None:
        self.call, self.speech_cache = call, speech
        self.stream = call.stream
        self.keys: asyncio.Queue[str] = asyncio.Queue()
        self.stream.on_dtmf = self.keys.put_nowait

    @property
    def payload_type(self) -> int:
        return self.stream.payload_type

    async def key_pressed(self, key: str) -> None:
        while await self.keys.get() != key:
            pass

    async def speech(self, text: str) -> bytes:
        """`text` spoken in the call's codec; silence (b"") when speech cannot be made."""
        try:
            audio = await asyncio.to_thread(
                self.speech_cache.render, text, settings.TTS_DEFAULT_LANGUAGE
            )
        except SpeechError:
            return b""
        return audio[self.payload_type]

    async def stored(self, name: str) -> bytes | None:
        """The WAV file `name` of the recordings storage (a voicemail message, a recorded
        greeting) in the call's codec; None when it cannot be read or converted."""

        def convert() -> bytes:
            with recordings_storage().open(name, "rb") as wav:
                data = wav.read()
            return self.speech_cache.telephone_audio(data, self.payload_type)

        try:
            return await asyncio.to_thread(convert)
        except (OSError, SpeechError):
            logger.warning("a stored recording could not be played")
            return None

    async def play(self, audio: bytes, also: asyncio.Future | None = None) -> bool:
        """Play `audio` to its end (True), or stop when the call ends or `also` completes."""
        racers = [self.stream.play(audio), self.call.ended.wait()]
        if also is not None:
            racers.append(also)
        player, *_ = await race(*racers, keep=(also,))
        return won(player) and not self.call.ended.is_set()

    async def say(self, text: str) -> bool:
        return await self.play(await self.speech(text))
