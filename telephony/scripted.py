"""A script run on an answered SIP call (docs/voice-apps.md): an outbound call's script, or
the voice application of a number that was called. The verbs are performed on the call's
media, keys heard by RFC 4733 or SIP INFO (one queue, telephony.sip.dialog's `on_key`), and
what they report handed to `report` (an outbound call's: realtime's pipeline).

voiceapps.program decides what comes next (branches, hooks, limits); this module only
performs the verbs. A hook's request runs on a thread with its own deadline
(VOICE_HOOK_TIMEOUT), never on the event loop, so one slow hook holds no other call.
Keys pressed before a gather (during a say) are kept for it: a callee who knows the menu
may type ahead.

`dial` rings its targets and bridges the first to answer (telephony.dial, with every rule
of forwarding); the script goes on once either end of the bridge hangs up (the call's end
ends it). An incoming call whose script starts with `dial` is answered only when a target
answers ("answer on bridge"): its caller hears ringing until then; any other verb answers
it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

from django.conf import settings

from core import metrics
from realtime.providers import call_identity
from telephony.dial import Dial, Dialing, DialResult
from telephony.listening import transcribe, warm
from telephony.recording import Recording, recording_save
from telephony.sip.race import race, won
from telephony.sip.rtp import pcm_from_g711
from telephony.speech import Speech, SpeechError
from telephony.vad import FRAME_SECONDS, POST_ROLL, VoiceDetector
from voiceapps.hooks import FetchFailed, hook_request, play_fetch
from voiceapps.program import LimitReached, Program, gather_result, reported
from voiceapps.verbs import PLAY_MAX_SECONDS, SPEECH_TIMEOUT_AUTO

logger = logging.getLogger(__name__)

Report = Callable[[list[dict]], Awaitable[None]]
# Keeps what a `record` recorded: (its id, the file's name in the recordings storage, seconds).
Store = Callable[[uuid.UUID, str, float], Awaitable[None]]
# Answers a call still ringing, its keys from then on handed to the callable given; False
# when the caller has gone.
Answer = Callable[[Callable[[str], None]], Awaitable[bool]]
# What a dial still does after its call ended: seeing its legs out, and its report.
DIAL_STOP_SECONDS = 4.0


class ScriptedTalk:
    """Runs `script` on an answered call: the `talk` of an OutboundCall (telephony.sip.uac),
    or called with an answered InboundDialog. `identity` is the body of every hook request
    besides its result, signed with `owner_id`'s secret; `language` the voice of a say that
    names none; `label` names the call in logs. `report` writes what the verbs reported.
    `ended_by` is the limit's sentence when a limit hung the call up, else "". `dialing`
    is what `dial` needs (telephony.dial.Dialing). `answer`, when given, answers a call that
    still rings, before the first verb that is not `dial`; without it the call is answered
    already."""

    def __init__(
        self,
        *,
        script: list[dict],
        identity: dict,
        owner_id,
        language: str,
        label: str,
        speech: Speech,
        report: Report,
        store: Store,
        dialing: Dialing,
        answer: Answer | None = None,
    ) -> None:
        self.language, self.label, self.speech, self.report = language, label, speech, report
        self.store, self.dialing, self.answer = store, dialing, answer
        self.answered = answer is None
        self.dials = 0  # the call's dials so far: each its own legs in the ledger
        self.told: asyncio.Future | None = None  # the last report's write (_tell)
        self.ended_by = ""
        self.keys: asyncio.Queue[str] = asyncio.Queue()
        self.program = Program(
            script=script,
            identity=identity,
            call_hook=lambda url, payload: hook_request(url=url, payload=payload, user_id=owner_id),
        )

    @classmethod
    def of_call(
        cls, record, *, speech: Speech, report: Report, store: Store, dialing: Dialing
    ) -> ScriptedTalk:
        """The talk of outbound call `record` (a Call with a script)."""
        return cls(
            script=record.script,
            identity=call_identity(record),
            owner_id=record.owner_id,
            language=record.language,
            label=f"call {record.pk}",
            speech=speech,
            report=report,
            store=store,
            dialing=dialing,
        )

    async def __call__(self, call) -> None:
        if self.answered:
            call.stream.on_dtmf = self.keys.put_nowait
        try:
            while (verb := self.program.next()) is not None:
                name, body = verb
                if name == "hangup":
                    return
                if name != "dial" and not await self._ready():
                    return
                await self._run(call, name, body)
        except LimitReached as reached:
            self.ended_by = reached.event["detail"]
            self._tell([reached.event])
        finally:
            if self.told is not None:
                # Every report is written before the call's end is (the timeline's order).
                await asyncio.shield(self.told)

    def _tell(self, reports: list[dict]) -> None:
        """Write `reports` after those told before, without holding up the call: the next
        verb starts at once, whatever the database takes."""
        if not reports:
            return
        before = self.told

        async def write() -> None:
            if before is not None:
                await asyncio.wait({before})
            try:
                await self.report(reports)
            except Exception:
                logger.exception("%s: what its script reported was not written", self.label)

        self.told = asyncio.ensure_future(write())

    async def _run(self, call, name: str, body: dict) -> None:
        if name == "say":
            for _ in range(body["loop"]):
                await call.stream.play(await self._speech(call, body))
        elif name == "play":
            audio = await self._clip(call, body)
            for _ in range(body["loop"] if audio else 0):
                await call.stream.play(audio)
        elif name == "pause":
            await asyncio.sleep(body["seconds"])
        elif name == "gather":
            result = await self._gather(call, body)
            await self._finished(name, body, result)
        elif name == "record":
            result = await self._record(call, body)
            await self._finished(name, body, result)
        elif name == "dial":
            result = await self._dial(call, body)
            await self._finished(name, body, result)
        elif name == "redirect":
            self._tell(await asyncio.to_thread(self.program.redirect, body["url"]))

    async def _ready(self) -> bool:
        """The call answered (now, if it still rang); False when its caller has gone."""
        if not self.answered:
            self.answered = await self.answer(self.keys.put_nowait)
        return self.answered

    async def _dial(self, call, body: dict) -> dict:
        """Ring the targets and bridge the first to answer, while the agent has room for
        their legs (the targets it has no room for are not rung). The call's end cancels
        this: the legs are seen out, and what the dial came to is reported all the same."""
        self.dials += 1
        dialing = self.dialing
        targets = list(dict.fromkeys(body["targets"]))
        held = dialing.places.take(len(targets))
        if not held:
            logger.info("%s: no room in the agent to dial", self.label)
            return DialResult("failed").as_verb_result()
        caller, headers = dialing.caller_ids[body["callerId"]]
        dial = Dial(
            ua=dialing.ua,
            party=call,
            gone=dialing.gone,
            targets=targets[:held],
            ring_seconds=body["timeout"],
            caller=caller,
            headers=headers,
            ledger=dialing.ledger(self.dials),
            leg_done=dialing.places.give,
            label=f"{self.label}, dial {self.dials}",
            answer=self._ready,
            recorded=dialing.recorded() if body.get("record") and dialing.recorded else None,
            music=dialing.music,
        )
        running = asyncio.ensure_future(dial.run())
        try:
            return (await asyncio.shield(running)).as_verb_result()
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                result = await asyncio.shield(asyncio.wait_for(running, DIAL_STOP_SECONDS))
                self._tell([reported("dial", result.as_verb_result())])
            raise
        finally:
            while not self.keys.empty():  # keys pressed to the target, not to the script
                self.keys.get_nowait()

    async def _finished(self, name: str, body: dict, result: dict) -> None:
        # The report first (the callee's digits reach the owner at once), then the hook,
        # whose answer may replace the rest of the script.
        self._tell([reported(name, result)])
        self._tell(await asyncio.to_thread(self.program.finished, name, body, result, report=False))

    async def _speech(self, call, say: dict) -> bytes:
        """The say's text in the call's codec; silence (b"") when it cannot be spoken."""
        language = say.get("language") or self.language
        try:
            audio = await asyncio.to_thread(self.speech.render, say["text"], language)
        except SpeechError:
            logger.warning("%s: a say of its script could not be spoken", self.label)
            return b""
        return audio.get(call.stream.payload_type, b"")

    async def _record(self, call, body: dict) -> dict:
        """The beep, then what the far end says until finishOnKey, maxSeconds,
        VOICEMAIL_SILENCE_SECONDS of silence or the call's end; saved like voicemail and kept
        by `store`. A hang-up while recording still keeps what was said (then the call's end
        goes on). Nothing but silence is no recording (`recordingId` null)."""
        stream = call.stream
        if body["beep"]:
            await stream.play(self.speech.tone()[stream.payload_type])
        recording = Recording(
            stream, max_seconds=body["maxSeconds"], silence=settings.VOICEMAIL_SILENCE_SECONDS
        )
        finish = body["finishOnKey"]
        hung_up = None
        try:
            while (left := recording.left()) > 0:
                try:
                    key = await asyncio.wait_for(self.keys.get(), min(0.2, left))
                except TimeoutError:
                    continue
                if finish and key == finish:
                    break
        except asyncio.CancelledError as cancelled:  # the call ended
            hung_up = cancelled
        audio = recording.take(trim=True)
        result = {"recordingId": None, "duration": 0}
        if audio is not None:
            saving = asyncio.ensure_future(self._save(audio, stream.payload_type))
            result = await asyncio.shield(saving)
        if hung_up is not None:
            # The call is over: no hook to ask what comes next, but the owner learns of it.
            self._tell([reported("record", result)])
            raise hung_up
        return result

    async def _save(self, audio: bytes, payload_type: int) -> dict:
        recording_id = uuid.uuid4()
        name, seconds = await recording_save(audio, payload_type, name=recording_id.hex)
        await self.store(recording_id, name, seconds)
        return {"recordingId": str(recording_id), "duration": seconds}

    async def _clip(self, call, play: dict) -> bytes:
        """The play's WAV in the call's codec (fetched once, cached: Speech.clip); b"" when
        it cannot be had, reported as `play_failed` (the script goes on)."""
        url = play["url"]
        try:
            audio = await asyncio.to_thread(
                self.speech.clip, url, lambda: play_fetch(url), max_seconds=PLAY_MAX_SECONDS
            )
        except (FetchFailed, SpeechError) as failed:
            self._tell([{"event": "play_failed", "verb": "play", "detail": str(failed)}])
            return b""
        return audio.get(call.stream.payload_type, b"")

    async def _gather(self, call, body: dict) -> dict:
        """Play the prompt until the first key, then take keys until one of gather's ends;
        a speech gather listens first (`_listen`), and a key pressed stops it."""
        keys = "dtmf" in body.get("input", ["dtmf"])
        speech = "speech" in body.get("input", ["dtmf"])
        digits = ""
        prompt = b""
        if speech:
            warm(settings.TRANSCRIBE_ENGINE)  # the model loads while the prompt plays
        if "say" in body:
            prompt, loop = await self._speech(call, body["say"]), body["say"]["loop"]
        elif "play" in body:
            prompt, loop = await self._clip(call, body["play"]), body["play"]["loop"]
        if prompt:
            for _ in range(loop):
                if not keys:
                    await call.stream.play(prompt)
                    continue
                _player, key = await race(call.stream.play(prompt), self.keys.get())
                if won(key):
                    digits += key.result()
                    break
        if speech and not digits:
            heard, pressed = await self._listen(call, body, keys=keys)
            if not pressed:
                return heard
            digits = pressed
        while not _gather_done(digits, body):
            try:
                digits += await asyncio.wait_for(self.keys.get(), body["timeout"])
            except TimeoutError:
                return gather_result(digits, body=body, timed_out=True)
        return gather_result(digits, body=body, timed_out=False)

    async def _listen(self, call, body: dict, *, keys: bool) -> tuple[dict | None, str]:
        """Listen for an utterance: (the gather's result, "") when it ended by its silence,
        its length or the gather's timeout with no voice; (None, the key) when a key was
        pressed first (when the gather takes keys: digits win).

        Its transcription starts early, once the caller has been quiet for half the
        speechTimeout (at least POST_ROLL: the utterance's audio is then whole unless they
        speak again), while the rest runs out: the words are mostly ready when the utterance
        ends. Voice coming back
        drops that transcription (`relay_speech_early_transcripts{outcome="dropped"}`) and
        the next quiet starts another."""
        stream = call.stream
        loop = asyncio.get_running_loop()
        detector = VoiceDetector(
            silence=_speech_timeout(body["speechTimeout"]), max_seconds=UTTERANCE_MAX_SECONDS
        )
        started = loop.time()
        # No voice by the gather's timeout ends it; nor may a caller whose packets stop keep
        # it listening past the longest utterance.
        latest = started + body["timeout"] + UTTERANCE_MAX_SECONDS
        early: asyncio.Future | None = None
        early_voice = None  # the utterance's last voice frame when `early` began
        # Half the speechTimeout: a pause for breath or at a comma (a few tenths of a second)
        # starts no transcription, and one started then is over about when the utterance is.
        early_after = max(POST_ROLL, detector.silence_frames * FRAME_SECONDS / 2)
        stream.record()
        try:
            while True:
                try:
                    if keys:
                        return None, await asyncio.wait_for(self.keys.get(), LISTEN_POLL)
                    await asyncio.sleep(LISTEN_POLL)
                except TimeoutError:
                    pass
                audio = bytes(stream.recording)
                stream.recording.clear()
                pcm = pcm_from_g711(audio, stream.payload_type)
                if pcm is not None and detector.feed(pcm):
                    break
                if early is not None and detector.last_voice != early_voice:
                    _drop(early)  # the caller spoke again
                    early = None
                if early is None and detector.quiet_seconds >= early_after:
                    early_voice = detector.last_voice
                    early = asyncio.ensure_future(self._words(detector.utterance(), body))
                now = loop.time()
                if not detector.started and now - started >= body["timeout"]:
                    break
                if now >= latest:
                    break
        finally:
            stream.recording = None
            if early is not None and (not detector.ended or detector.last_voice != early_voice):
                _drop(early)
                early = None
        if not detector.started:  # ends as a key gather with no key
            return gather_result("", body=body, timed_out=True), ""
        if early is not None:
            metrics.speech_early_transcripts.labels("used").inc()
            heard = await early
        else:
            heard = await self._words(detector.utterance(), body)
        result = {"digits": "", "reason": "speech", "speech": heard.text}
        return {**result, "confidence": heard.confidence}, ""

    async def _words(self, utterance: bytes, body: dict):
        return await transcribe(
            utterance,
            engine=settings.TRANSCRIBE_ENGINE,
            hints=body.get("hints", []),
            label=self.label,
        )


def _drop(early: asyncio.Future) -> None:
    """Drop an early transcription whose utterance went on (or whose gather ended without
    it): its place in the child freed if it has not begun."""
    early.cancel()
    metrics.speech_early_transcripts.labels("dropped").inc()


LISTEN_POLL = 0.1  # seconds between two looks at what a speech gather heard
UTTERANCE_MAX_SECONDS = 30.0


def _speech_timeout(value) -> float:
    return SPEECH_TIMEOUT_AUTO if value == "auto" else float(value)


def _gather_done(digits: str, body: dict) -> bool:
    """Whether the keys so far end the gather (its finishing key, or enough digits), by
    gather_result's own rule."""
    return gather_result(digits, body=body, timed_out=False)["reason"] != "timeout"
