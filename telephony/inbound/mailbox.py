"""The owner's mailbox, behind `*`, the PIN and `#` during the voicemail greeting: the new
messages, newest first, each marked heard once played. Wrong PINs count against the number's
PIN lock (virtual_numbers.services.number_pin_verify). Neither the PIN nor any key pressed is
ever logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from core.errors import ApplicationError
from core.recordings import recordings_storage
from history import selectors as history_selectors
from history import services as history_services
from telephony.inbound.line import Line
from telephony.speech import SpeechError
from virtual_numbers.services import PinLocked, PinMismatch, number_pin_verify

logger = logging.getLogger(__name__)

PIN_DIGIT_TIMEOUT = 10.0  # seconds between two keys of the PIN
PIN_MAX_KEYS = 16
PIN_ATTEMPTS = 3  # wrong PINs in one call before it hangs up


class Mailbox:
    """The owner's mailbox, after `*`: the PIN and `#`, then the new messages."""

    def __init__(self, line: Line, *, db: Callable, number) -> None:
        self.line, self.db, self.number = line, db, number

    async def _say(self, text: str) -> bool:
        return await self.line.say(text)

    async def _pin(self) -> str | None:
        """Keys up to `#`; None when the caller stops pressing or hangs up."""
        keys = []
        while len(keys) <= PIN_MAX_KEYS:
            getter = asyncio.ensure_future(self.line.keys.get())
            ended = asyncio.ensure_future(self.line.call.ended.wait())
            done, _ = await asyncio.wait(
                {getter, ended}, timeout=PIN_DIGIT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
            getter.cancel()
            ended.cancel()
            if getter not in done:
                return None
            key = getter.result()
            if key == "#":
                return "".join(keys)
            keys.append(key)
        return None

    async def run(self) -> None:
        # Keys pressed after `*` are the PIN's, even while the prompt is spoken (type-ahead):
        # a phone that dials `*1234#` at once opens the mailbox.
        if not await self._say("Please enter your PIN, then press the hash key."):
            return
        for attempt in range(PIN_ATTEMPTS):
            pin = await self._pin()
            if pin is None:
                return
            try:
                await self.db(number_pin_verify)(number=self.number, pin=pin)
            except PinLocked:
                await self._say("This mailbox is locked. Please try again later. Goodbye.")
                return
            except PinMismatch:
                if attempt + 1 == PIN_ATTEMPTS:
                    await self._say("That PIN is wrong. Goodbye.")
                    return
                if not await self._say("That PIN is wrong. Please try again."):
                    return
                continue
            except ApplicationError:  # every hashing slot busy
                await self._say("Sorry, the mailbox cannot be opened now. Goodbye.")
                return
            await self._messages()
            return

    async def _messages(self) -> None:
        messages = await self.db(history_selectors.mailbox_messages)(number=self.number)
        count = len(messages)
        plural = "message" if count == 1 else "messages"
        if not await self._say(f"You have {count or 'no'} new {plural}."):
            return
        for index, record in enumerate(messages, start=1):
            audio = await asyncio.to_thread(self._audio, record.recording)
            if audio is None:
                continue
            if not await self._say(f"Message {index}.") or not await self.line.play(audio):
                return
            await self.db(history_services.call_record_mark_heard)(record=record)
        await self._say("End of messages. Goodbye.")

    def _audio(self, name: str) -> bytes | None:
        try:
            with recordings_storage().open(name, "rb") as wav:
                data = wav.read()
            return self.line.speech_cache.telephone_audio(data, self.line.payload_type)
        except (OSError, SpeechError):
            logger.warning("a voicemail message could not be played")
            return None
