"""Calls to the virtual numbers: routing, ringing, voicemail, and the mailbox behind the PIN.

The SIP user agent hands every new INVITE to `InboundDesk.take` (docs/telephony.md, "Inbound
calls"). In order:
- a source that is neither the trunk nor in SIP_INBOUND_SOURCES: 403, nothing recorded
  (answered by the user agent itself, which keeps no state for it);
- a number that is not provisioned, or held by nobody: 404, nothing recorded;
- a caller on the number's blocklist: 603 and a `blocked` record (duration 0);
- a Call-ID seen before (a re-sent INVITE): 482, nothing recorded again;
- an agent at SIP_MAX_CONCURRENT_CALLS: 486 and a `missed` record;
- otherwise 180 Ringing and `incoming_call` to the owner's sockets. A caller who hangs up
  within INBOUND_RING_SECONDS is `missed`; after it voicemail answers (`answered`, with the
  duration from answer to hang-up): the greeting, a beep, then the caller's message, recorded
  until they hang up, VOICEMAIL_MAX_SECONDS or VOICEMAIL_SILENCE_SECONDS of silence.
- `*` during the greeting, then the PIN and `#` (RFC 4733 events), opens the mailbox: the
  new messages, newest first, each marked heard once played. Wrong PINs count against the
  number's PIN lock (virtual_numbers.services.number_pin_verify).

Every call ends in exactly one history record, written with the ledger row (telephony.models.
InboundCall) that a crashed agent's calls are recovered from. The PIN and the keys pressed
are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
import uuid
from collections.abc import Callable

import phonenumbers
from django.conf import settings
from django.core.files.base import ContentFile

from core.errors import ApplicationError
from core.phone import e164_possible, e164_valid
from core.recordings import recordings_storage
from history import selectors as history_selectors
from history import services as history_services
from history.models import ANONYMOUS_CALLER, CallStatus
from telephony import services
from telephony.sip.message import uri_of, user_of
from telephony.sip.rtp import wav_from_g711
from telephony.sip.uas import InboundCall
from telephony.speech import Speech, SpeechError
from virtual_numbers import selectors as number_selectors
from virtual_numbers.services import PinLocked, PinMismatch, number_pin_verify

logger = logging.getLogger(__name__)

DEFAULT_GREETING = (
    "The person you are calling is not available. Please leave a message after the tone."
)
PIN_DIGIT_TIMEOUT = 10.0  # seconds between two keys of the PIN
PIN_MAX_KEYS = 16
PIN_ATTEMPTS = 3  # wrong PINs in one call before it hangs up
SILENCE_KEPT = 0.5  # seconds of the silence that ended a message kept at its end
ANONYMOUS_USERS = {"", "anonymous", "restricted", "unavailable", "unknown", "private"}


# --- who called whom -------------------------------------------------------------------------
def _phone_user(uri: str) -> str:
    """The user part of a sip: or tel: URI, without user parameters or visual separators."""
    user = uri[4:] if uri.lower().startswith("tel:") else user_of(uri)
    user = user.split(";", 1)[0]
    return "".join(ch for ch in user if ch not in " -.()").replace("%20", "")


def _as_e164(user: str, check) -> str | None:
    """`user` as E.164 under `check` (e164_valid or e164_possible): written with `+`, with
    00, without any prefix, or in national form for SIP_NATIONAL_REGION."""
    if not user or len(user) > 32:
        return None
    if user.startswith("+"):
        return check(user)
    if user.startswith("00"):
        return check("+" + user[2:])
    found = check("+" + user)
    if found is None:
        try:
            parsed = phonenumbers.parse(user, settings.SIP_NATIONAL_REGION)
        except phonenumbers.NumberParseException:
            return None
        found = check(phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164))
    return found


def dialled_number(request_uri: str) -> str | None:
    """The number a trunk's INVITE is for, as E.164, from its Request-URI."""
    return _as_e164(_phone_user(request_uri), e164_valid)


def caller_number(from_header: str) -> str:
    """The caller as E.164, or ANONYMOUS_CALLER for a withheld or unreadable caller ID."""
    user = _phone_user(uri_of(from_header or ""))
    if user.lower() in ANONYMOUS_USERS:
        return ANONYMOUS_CALLER
    return _as_e164(user, e164_possible) or ANONYMOUS_CALLER


def source_allowed(source_host: str, trunk_host: str) -> bool:
    """Calls come from the trunk, or from SIP_INBOUND_SOURCES (addresses, networks, `any`)."""
    if source_host == trunk_host:
        return True
    try:
        address = ipaddress.ip_address(source_host)
    except ValueError:
        return False
    for allowed in settings.SIP_INBOUND_SOURCES:
        if allowed.lower() == "any":
            return True
        if address in ipaddress.ip_network(allowed, strict=False):
            return True
    return False


# --- the desk --------------------------------------------------------------------------------
class InboundDesk:
    """The inbound side of one telephony agent. `db` runs a function in the agent's database
    thread; `has_room()` says whether the agent may take one more call."""

    def __init__(self, *, ua, speech: Speech, db: Callable, has_room: Callable[[], bool]):
        self.ua, self.speech, self.db, self.has_room = ua, speech, db, has_room
        self.live: dict[str, tuple[InboundCall, object]] = {}  # Call-ID -> (SIP, ledger row)
        self.tasks: set[asyncio.Task] = set()
        self.stopping = False
        ua.on_invite = self.take
        ua.accepts_source = lambda host: source_allowed(host, ua.trunk[0])

    def __len__(self) -> int:
        return len(self.live)

    def ledger_pks(self) -> list:
        return [ledger.pk for _, ledger in self.live.values()]

    async def take(self, call: InboundCall) -> None:
        task = asyncio.create_task(self._run(call))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def stop(self, grace: float) -> None:
        """Ringing calls are turned away, answered ones hung up; each is recorded."""
        self.stopping = True
        for call, _ in list(self.live.values()):
            call.ended.set()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=grace)

    async def _run(self, call: InboundCall) -> None:
        try:
            await self._route(call)
        except Exception:
            logger.exception("inbound call %s: the agent failed", call.call_id)
            with contextlib.suppress(Exception):
                await call.refuse(500, "Server Internal Error")
        finally:
            self.live.pop(call.call_id, None)
            with contextlib.suppress(Exception):
                await call.hang_up()
            call.close()

    async def _route(self, call: InboundCall) -> None:
        e164 = dialled_number(call.request_uri)
        number = None
        if e164 is not None:
            number = await self.db(number_selectors.number_by_e164)(e164=e164)
        if number is None:
            await call.refuse(404, "Not Found")
            return
        caller = caller_number(call.invite.get("From") or "")
        blocked = caller != ANONYMOUS_CALLER and await self.db(number_selectors.caller_blocked)(
            number=number, caller_num=caller
        )
        ringing = not blocked and self.has_room() and not self.stopping
        ledger = await self.db(services.inbound_call_open)(
            sip_call_id=call.call_id, number=number, caller_num=caller, ringing=ringing
        )
        if ledger is None:
            await call.refuse(482, "Loop Detected")
            return
        if blocked:
            await call.refuse(603, "Decline")
            await self._record(ledger, CallStatus.BLOCKED)
            return
        if not ringing:
            await call.refuse(486, "Busy Here")
            await self._record(ledger, CallStatus.MISSED)
            return
        self.live[call.call_id] = (call, ledger)
        await self._ring_then_answer(call, number, ledger)

    async def _record(self, ledger, status: str, **kwargs) -> None:
        record = await self.db(services.inbound_call_record)(call=ledger, status=status, **kwargs)
        if record is None:
            name = kwargs.get("recording")
            if name:  # nobody will ever name it now
                await asyncio.to_thread(recordings_storage().delete, name)

    async def _ring_then_answer(self, call: InboundCall, number, ledger) -> None:
        await call.ringing()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(call.ended.wait(), settings.INBOUND_RING_SECONDS)
        if call.ended.is_set() and not call.canceled.is_set():
            await call.refuse(480, "Temporarily Unavailable")  # the agent is stopping
        if call.final_status:  # canceled, or turned away
            await self._record(ledger, CallStatus.MISSED)
            return
        media = await call.answer()
        if media is None:
            await self._record(ledger, CallStatus.MISSED)
            return
        answered = time.monotonic()
        await self.db(services.inbound_call_answered)(call=ledger)
        recording = await Voicemail(call, self.speech, self.db, number).run()
        await call.hang_up()
        duration = max(0, round(time.monotonic() - answered))
        await self._record(ledger, CallStatus.ANSWERED, duration=duration, **recording)


class Voicemail:
    """What an answered call hears: the greeting, then either the beep and the recording,
    or (after `*`) the mailbox."""

    def __init__(self, call: InboundCall, speech: Speech, db: Callable, number) -> None:
        self.call, self.speech, self.db, self.number = call, speech, db, number
        self.stream = call.stream
        self.keys: asyncio.Queue[str] = asyncio.Queue()
        self.stream.on_dtmf = self.keys.put_nowait

    async def run(self) -> dict:
        """Play the greeting; the recording's fields for the record ({} when none)."""
        greeting = await self._speech(self.number.greeting or DEFAULT_GREETING)
        star = asyncio.ensure_future(self._key_pressed("*"))
        try:
            played = await self._play(greeting, also=star)
        finally:
            star.cancel()
        if star.done() and not star.cancelled():
            await Mailbox(self).run()
            return {}
        if not played or not await self._play(self.speech.tone()[self.stream.payload_type]):
            return {}
        return await self._record()

    async def _key_pressed(self, key: str) -> None:
        while await self.keys.get() != key:
            pass

    async def _speech(self, text: str) -> bytes:
        try:
            audio = await asyncio.to_thread(self.speech.render, text, settings.TTS_DEFAULT_LANGUAGE)
        except SpeechError:
            return b""
        return audio[self.stream.payload_type]

    async def _play(self, audio: bytes, also: asyncio.Future | None = None) -> bool:
        """Play `audio` to its end (True), or stop when the call ends or `also` completes."""
        player = asyncio.ensure_future(self.stream.play(audio))
        ended = asyncio.ensure_future(self.call.ended.wait())
        waiting = {player, ended} | ({also} if also is not None else set())
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            player.cancel()
            ended.cancel()
        return player.done() and not player.cancelled() and not self.call.ended.is_set()

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


class Mailbox:
    """The owner's mailbox, after `*`: the PIN and `#`, then the new messages."""

    def __init__(self, voicemail: Voicemail) -> None:
        self.vm = voicemail

    async def _say(self, text: str) -> bool:
        return await self.vm._play(await self.vm._speech(text))

    async def _pin(self) -> str | None:
        """Keys up to `#`; None when the caller stops pressing or hangs up."""
        keys = []
        while len(keys) <= PIN_MAX_KEYS:
            getter = asyncio.ensure_future(self.vm.keys.get())
            ended = asyncio.ensure_future(self.vm.call.ended.wait())
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
        vm = self.vm
        while not vm.keys.empty():  # keys of the greeting's end are not the PIN's
            vm.keys.get_nowait()
        if not await self._say("Please enter your PIN, then press the hash key."):
            return
        for attempt in range(PIN_ATTEMPTS):
            pin = await self._pin()
            if pin is None:
                return
            try:
                await vm.db(number_pin_verify)(number=vm.number, pin=pin)
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
        vm = self.vm
        messages = await vm.db(history_selectors.mailbox_messages)(number=vm.number)
        count = len(messages)
        plural = "message" if count == 1 else "messages"
        if not await self._say(f"You have {count or 'no'} new {plural}."):
            return
        for index, record in enumerate(messages, start=1):
            audio = await asyncio.to_thread(self._audio, record.recording)
            if audio is None:
                continue
            if not await self._say(f"Message {index}.") or not await vm._play(audio):
                return
            await vm.db(history_services.call_record_mark_heard)(record=record)
        await self._say("End of messages. Goodbye.")

    def _audio(self, name: str) -> bytes | None:
        try:
            with recordings_storage().open(name, "rb") as wav:
                data = wav.read()
            return self.vm.speech.telephone_audio(data, self.vm.stream.payload_type)
        except (OSError, SpeechError):
            logger.warning("a voicemail message could not be played")
            return None
