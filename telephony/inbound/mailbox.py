"""The owner's mailbox, behind `*`, the PIN and `#` during the voicemail greeting: the new
messages, newest first, each marked heard once played; then a menu, 1 to hear them again and
3 to record the greeting callers hear (issue 44: a beep, up to 60 s ended by `#`, played back,
then 1 to keep it, 2 to record it again, 3 to go back to the spoken greeting), and for a
number with opening hours 4 to record its closed greeting the same way (issue 57). Wrong PINs
count against the number's PIN lock (virtual_numbers.services.number_pin_verify). Neither the
PIN nor any key pressed is ever logged."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

from django.conf import settings

from core.errors import ApplicationError, NotFound
from history import selectors as history_selectors
from history import services as history_services
from telephony.inbound.line import Line
from telephony.recording import Recording, recording_save
from telephony.sip.race import race, won
from virtual_numbers import selectors as number_selectors
from virtual_numbers.models import GREETING_PREFIX, GREETING_RECORDING_MAX_SECONDS
from virtual_numbers.services import (
    PinLocked,
    PinMismatch,
    number_greeting_recording_remove,
    number_greeting_recording_set,
    number_pin_verify,
)

logger = logging.getLogger(__name__)

PIN_DIGIT_TIMEOUT = 10.0  # seconds between two keys of the PIN
PIN_MAX_KEYS = 16
PIN_ATTEMPTS = 3  # wrong PINs in one call before it hangs up
MENU_TIMEOUT = 6.0  # seconds a menu waits for a key once its prompt has been said
MENU_PROMPTS = 2  # times a menu is said before the mailbox gives up on it

MENU = "Press 1 to hear your messages again, or 3 to record your greeting."
MENU_NO_MESSAGES = "Press 3 to record your greeting."
# A number with opening hours: 4 records the greeting its callers hear while it is closed.
MENU_WITH_HOURS = (
    "Press 1 to hear your messages again, 3 to record your greeting, or 4 to record your "
    "closed greeting."
)
MENU_NO_MESSAGES_WITH_HOURS = (
    "Press 3 to record your greeting, or 4 to record your closed greeting."
)
# The recorder's words, of the `greeting` or the `closed greeting`
RECORDER = {
    "record": "After the tone, say your {what}, then press the hash key.",
    "keep": "Press 1 to keep this {what}, 2 to record it again, or 3 to go back to the spoken "
    "{what}.",
    "nothing": "I did not hear a {what}. Press 2 to record it again, or 3 to go back to the "
    "spoken {what}.",
    "spoken": "Callers will hear your spoken {what}.",
    "unchanged": "Your {what} is unchanged.",
    "saved": "Your {what} is saved.",
    "not_saved": "Sorry, your {what} could not be saved. Goodbye.",
}
WHAT = {False: "greeting", True: "closed greeting"}
RECORD_PROMPT = RECORDER["record"].format(what=WHAT[False])


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
            getter, _ended = await race(
                self.line.keys.get(), self.line.call.ended.wait(), timeout=PIN_DIGIT_TIMEOUT
            )
            if not won(getter):
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
            await self._menu()
            return

    # --- keys ------------------------------------------------------------------------------
    async def _next_key(self, keys: str) -> str:
        """The next key pressed that is one of `keys`; the others are dropped."""
        while (key := await self.line.keys.get()) not in keys:
            pass
        return key

    async def _choice(self, audio: bytes, keys: str) -> str | None:
        """Play `audio` (a prompt) and answer the first of `keys` pressed while it plays
        (type-ahead) or within MENU_TIMEOUT after it; None when none is, or the call ends."""
        pressed = asyncio.ensure_future(self._next_key(keys))
        try:
            await self.line.play(audio, also=pressed)
            if not pressed.done() and not self.line.call.ended.is_set():
                await race(pressed, self.line.call.ended.wait(), timeout=MENU_TIMEOUT)
            if won(pressed) and not self.line.call.ended.is_set():
                return pressed.result()
            return None
        finally:
            pressed.cancel()

    async def _ask(self, text: str, keys: str, *, before: bytes = b"") -> str | None:
        """`before` (audio) and the prompt `text`, said up to MENU_PROMPTS times (`before`
        only the first) until one of `keys` is pressed; None when none is."""
        prompt = await self.line.speech(text)
        for attempt in range(MENU_PROMPTS):
            choice = await self._choice((before if attempt == 0 else b"") + prompt, keys)
            if choice is not None or self.line.call.ended.is_set():
                return choice
        return None

    # --- messages --------------------------------------------------------------------------
    async def _menu(self) -> None:
        """The new messages, then the menu until the owner stops choosing or hangs up. `3`
        pressed while the messages play goes straight to recording the greeting (the
        messages not yet played stay new)."""
        messages = await self.db(history_selectors.mailbox_messages)(number=self.number)
        hours = await self.db(number_selectors.hours_of)(number=self.number)
        recorders = "3" if hours is None else "34"
        if hours is None:
            menu = MENU if messages else MENU_NO_MESSAGES
        else:
            menu = MENU_WITH_HOURS if messages else MENU_NO_MESSAGES_WITH_HOURS
        choice = await self._messages(messages, count=True, stop=recorders)
        while not self.line.call.ended.is_set():
            if choice is None:
                choice = await self._ask(menu, ("1" if messages else "") + recorders)
                if choice is None:
                    await self._say("Goodbye.")
                    return
            if choice == "1":
                choice = await self._messages(messages, count=False, stop=recorders)
            elif not await self._greeting(closed=choice == "4"):
                return
            else:
                choice = None

    async def _messages(self, messages: list, *, count: bool, stop: str) -> str | None:
        """Say how many messages there are (`count`) and play each, marking it heard once
        played; the key of `stop` (a recorder's) when the owner pressed one meanwhile (the
        rest is skipped), else None."""
        stopped = asyncio.ensure_future(self._next_key(stop))
        try:
            if count:
                plural = "message" if len(messages) == 1 else "messages"
                text = f"You have {len(messages) or 'no'} new {plural}."
                if not await self.line.play(await self.line.speech(text), also=stopped):
                    return self._pressed(stopped)
            for index, record in enumerate(messages, start=1):
                audio = await self.line.stored(record.recording)
                if audio is None:
                    continue
                said = await self.line.speech(f"Message {index}.")
                if not await self.line.play(said + audio, also=stopped):
                    return self._pressed(stopped)
                if not record.heard:
                    await self.db(history_services.call_record_mark_heard)(record=record)
                    record.heard = True
            return self._pressed(stopped)
        finally:
            stopped.cancel()

    @staticmethod
    def _pressed(key: asyncio.Future) -> str | None:
        return key.result() if key.done() and not key.cancelled() else None

    # --- the greeting ----------------------------------------------------------------------
    async def _greeting(self, *, closed: bool = False) -> bool:
        """Record a greeting (`closed`: the closed greeting), play it back and do what the
        owner chooses: 1 keeps it (in place of the spoken one, the recording it replaces
        deleted), 2 records again, 3 goes back to the spoken one (a recorded one is removed).
        Nothing is kept unless 1 is pressed. False when the call has ended, True to go back to
        the menu."""
        words = {key: text.format(what=WHAT[closed]) for key, text in RECORDER.items()}
        while True:
            if not await self._say(words["record"]):
                return False
            tone = self.line.speech_cache.tone()[self.line.payload_type]
            if not await self.line.play(tone):
                return False
            audio = await self._record()
            if self.line.call.ended.is_set():
                return False  # hung up while recording: nothing is kept
            if audio is None:
                choice = await self._ask(words["nothing"], "23")
            else:
                choice = await self._ask(words["keep"], "123", before=audio)
            if choice == "2":
                continue
            if choice == "1":
                return await self._keep(audio, closed=closed, words=words)
            if choice == "3":
                with contextlib.suppress(NotFound):  # nothing recorded before: nothing to do
                    await self.db(number_greeting_recording_remove)(
                        number=self.number, closed=closed
                    )
                return await self._say(words["spoken"])
            if self.line.call.ended.is_set():
                return False
            return await self._say(words["unchanged"])

    async def _record(self) -> bytes | None:
        """What the owner says after the tone, up to GREETING_RECORDING_MAX_SECONDS, until
        `#`, VOICEMAIL_SILENCE_SECONDS of silence or the call's end; silence at its end is
        cut (all but half a second). None when nothing but silence was heard."""
        while not self.line.keys.empty():  # keys pressed before the tone end nothing
            self.line.keys.get_nowait()
        recording = Recording(
            self.line.stream,
            max_seconds=GREETING_RECORDING_MAX_SECONDS,
            silence=settings.VOICEMAIL_SILENCE_SECONDS,
        )
        hashed = asyncio.ensure_future(self._next_key("#"))
        ended = asyncio.ensure_future(self.line.call.ended.wait())
        try:
            while not hashed.done() and not ended.done() and (left := recording.left()) > 0:
                await asyncio.wait({hashed, ended}, timeout=min(0.2, left))
        finally:
            hashed.cancel()
            ended.cancel()
        return recording.take(trim=True)

    async def _keep(self, audio: bytes, *, closed: bool, words: dict[str, str]) -> bool:
        name, seconds = await recording_save(
            audio, self.line.payload_type, name=f"{GREETING_PREFIX}{uuid.uuid4().hex}"
        )
        try:
            await self.db(number_greeting_recording_set)(
                number=self.number, name=name, seconds=seconds, closed=closed
            )
        except NotFound:  # the number was given back, or its hours removed, meanwhile
            await self._say(words["not_saved"])  # (and the file deleted)
            return False
        return await self._say(words["saved"])
