"""Ringing targets for a call and bridging the first that takes it: what forwarding
(telephony.inbound.forwarding) and a script's `dial` verb (telephony.scripted) share.

- Each target is dialled through the trunk as its own INVITE, all at once; its ledger row
  (calls.Leg, written by `Ledger.open`) is written before, so a target is
  dialled at most once per dial of a call, and counts in the owner's quotas. Targets the
  dialing policy, the inventory or the quotas refuse now are not dialled.
- `screen(sip)`, when given, decides whether an answered leg may win (forwarding's
  screening). The first leg to be accepted wins: every other leg is cancelled (CANCEL, or
  BYE if it answered meanwhile), `answer()` answers the party only now when it was still
  ringing ("answer on bridge"), and the two streams relay each other's RTP
  (rtp.RtpStream.relay: PCMU and PCMA transcoded, RFC 4733 events re-typed) until either
  end hangs up or the bridge reaches its cap (SIP_MAX_CALL_SECONDS, or less when the owner's
  answered seconds run short).
- Given a `transfer` (forwarding's, telephony.inbound.transfer), the bridged SIP target may
  hand the call on with REFER (RFC 3515): the bridge ends, the transfer dials its target for
  the party, and the result carries how that went (`transfer`). A bridged tab may consult
  someone first (the browser phone's Consult, issue 58): the bridge ends the same way, and
  the transfer's `consult` holds the party, lets the tab talk with the target, and hands the
  party on (Complete) or gives it back to the tab (Cancel, or no answer).
- The result says how it went: `completed` (bridged, with the target and the seconds),
  `busy`, `no_answer` or `failed` (nobody could be dialled, or every leg failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.db import DatabaseError

from core.recordings import recordings_storage
from core.webrtc import BROWSER
from history import recordings
from telephony import services
from telephony.sip import sdp
from telephony.sip.message import new_sip_call_id
from telephony.sip.race import race, won
from telephony.sip.recorder import CALLER, OTHER, CallRecorder
from telephony.sip.refer import Refusal
from telephony.sip.uac import OutboundCall, Outcome
from telephony.speech import Speech, SpeechError

logger = logging.getLogger(__name__)

BUSY_CODES = frozenset({486, 600})
# RFC 3326 §2: "the Reason header field [...] MAY appear in CANCEL" to say why; a leg that
# lost to another is told so, as RFC 3326's own example and every PBX's ring group say it, so
# that the phone does not show a missed call.
COMPLETED_ELSEWHERE = 'SIP;cause=200;text="Call completed elsewhere"'


@dataclass(frozen=True)
class RingTarget:
    """One thing a dial rings, for its own `seconds`: a phone (E.164) or a SIP URI (`target`,
    dialled as a leg whose calls.Leg `Ledger.open` writes), or a person's console tabs
    (`ring`, a telephony.webrtc.ring.BrowserRing; `target` "browser"). `entry` is the index of
    the ring list's entry it came from and `member` the user whose entry it is (issue 57);
    both None for a script's dial."""

    target: str
    seconds: float
    entry: int | None = None
    member: object = None
    ring: object = None

    @property
    def key(self) -> str:
        """Its name among the dial's targets: the phone or URI, or its person's tabs."""
        return f"{BROWSER}:{self.member}" if self.ring is not None else self.target


@dataclass
class Ledger:
    """The dial's rows, each a function run in the agent's database thread: `open(sip_call_ids)`
    the legs to dial (target -> Call-ID given; dial_legs_open), `bridged(leg)` the talk
    granted to the winner (0 refuses the bridge), `unbridged(leg)` when the party left before
    the bridge, `ended(leg, duration)` each leg's end."""

    open: Callable[[dict[str, str]], Awaitable[list]]
    bridged: Callable[[object], Awaitable[int | None]]
    unbridged: Callable[[object], Awaitable[None]]
    ended: Callable[[object, int], Awaitable[None]]


@dataclass
class Recorded:
    """A bridge to record (issue 58; telephony.sip.recorder): `announcement()` what both
    parties hear first (G.711 by payload type, from the speech cache), `open()` the
    recording's row and the path its WAV is written to, `done(row, seconds, incomplete)`
    once it is closed; each in the agent's database thread but the first."""

    announcement: Callable[[], Awaitable[dict[int, bytes]]]
    open: Callable[[], Awaitable[tuple[object, str]]]
    done: Callable[[object, float, bool], Awaitable[None]]


@dataclass
class DialResult:
    status: str  # completed, busy, no_answer or failed
    target: str | None = None  # the target bridged
    duration: int = 0  # seconds bridged
    # A bridged target that handed the call on (REFER): how the transfer's own dial went.
    transfer: DialResult | None = None

    def as_verb_result(self) -> dict:
        """The `dial` verb's result (docs/voice-apps.md)."""
        return {"dialStatus": self.status, "answeredBy": self.target, "duration": self.duration}


async def _already() -> bool:
    return True


class Dial:
    """One dial of `targets` for `party` (an answered or ringing call: its `stream` is bridged
    to the winner's once `answer()` says it is answered). `gone()` is awaitable once the
    party has hung up. `caller` is the legs' From user, with `headers` (a Diversion);
    `leg_done()` gives one leg's place in the agent's capacity back, for every target,
    dialled or not. `label` names the call in logs."""

    def __init__(
        self,
        *,
        ua,
        party,
        gone: Callable[[], Awaitable],
        targets: list[str],
        ring_seconds: float,
        caller: str,
        headers: tuple[tuple[str, str], ...],
        ledger: Ledger,
        leg_done: Callable[[], None],
        label: str,
        answer: Callable[[], Awaitable[bool]] = _already,
        screen: Callable[[OutboundCall], Awaitable[bool]] | None = None,
        browser=None,
        rings: list[RingTarget] | None = None,
        music: Callable[[int], Awaitable[bytes | None]] | None = None,
        recorded: Recorded | None = None,
        transfer: Transfer | None = None,
    ) -> None:
        self.ua, self.party, self.gone, self.targets = ua, party, gone, targets
        self.transfer = transfer  # given: a bridged SIP target may hand the call on (REFER)
        self.ring_seconds, self.caller, self.headers = ring_seconds, caller, headers
        self.ledger, self.leg_done, self.label = ledger, leg_done, label
        self.answer, self.screen, self.recorded = answer, screen, recorded
        # The music either end of the bridge hears while the other holds, in place of Relay's
        # own (a number's, issue 58; rtp.Holding.music_source): a phone or a browser's tab.
        self.music = music
        # What is rung: `rings` (a ring list's targets, each with its seconds), or `targets`
        # for `ring_seconds` each. The target "browser": the owner's tabs
        # (telephony.webrtc.ring.BrowserRing), rung beside the phones, never screened (the
        # page shows who calls), no trunk call; a script's dial has none (`browser` None).
        if rings is None:
            rings = [RingTarget(t, ring_seconds) for t in targets if t != BROWSER]
            if BROWSER in targets:
                rings.append(RingTarget(BROWSER, ring_seconds, ring=browser))
        self.rings = rings
        # The legs to dial: phones and SIP URIs ("browser" without a ring has nothing to dial).
        self.by_target = {t.target: t for t in rings if t.ring is None and t.target != BROWSER}
        self.winner: asyncio.Future = asyncio.get_running_loop().create_future()
        self.bridge_over = asyncio.Event()
        self.party_gone = False
        self.sips: dict[str, OutboundCall] = {}  # target -> its leg's SIP call
        self.tasks: dict[str, asyncio.Task] = {}  # target -> its leg's task
        self.outcomes: list[Outcome] = []

    async def run(self) -> DialResult:
        """Ring the targets, bridge the first to take the call. Every leg is over when this
        returns, or when it is cancelled (the party's call ended): then each is hung up."""
        browsers = [t for t in self.rings if t.ring is not None]
        for _ in [t for t in self.rings if t.target == BROWSER and t.ring is None]:
            self.leg_done()  # a browser only forwarding rings: a script's dial cannot
        sip_call_ids = {target: new_sip_call_id(self.ua.host) for target in self.by_target}
        try:
            legs = await self.ledger.open(sip_call_ids) if sip_call_ids else []
        except BaseException:
            for _ in range(len(sip_call_ids) + len(browsers)):
                self.leg_done()
            raise
        if skipped := len(sip_call_ids) - len(legs):
            logger.info(
                "%s: %d of %d target(s) not dialled (refused by the dialing policy or the "
                "owner's quotas, or dialled before)",
                self.label,
                skipped,
                len(sip_call_ids),
            )
        for _ in range(skipped):
            self.leg_done()  # the places of targets not dialled
        for browser in browsers:
            self.tasks[browser.key] = asyncio.create_task(self._browser_leg(browser))
        if not browsers and not legs:
            return DialResult("failed")
        for leg in legs:
            self.tasks[leg.target] = asyncio.create_task(self._leg(leg))
        dialling = list(self.tasks.values())
        try:
            _winner, party_gone, _all_done = await race(
                self.winner, self.gone(), asyncio.wait(dialling), keep=(self.winner,)
            )
            self.party_gone = won(party_gone)
            if self.winner.done() and not self.party_gone:
                bridged = await self._bridge(*self.winner.result())
                if bridged is not None:
                    return bridged
        finally:
            self.bridge_over.set()
            for sip in self.sips.values():
                sip.hang_up()
            # The legs' CANCEL (or BYE) transactions are seen out before the call goes on,
            # and even when it ended (this task cancelled): a leg is never left ringing.
            await asyncio.shield(asyncio.wait(dialling))
        return DialResult(self._unbridged_status())

    def _unbridged_status(self) -> str:
        """What the legs' ends say when none was bridged: busy if a target was busy, else
        no_answer if one rang unanswered, else failed."""
        if any(o.kind == "rejected" and o.code in BUSY_CODES for o in self.outcomes):
            return "busy"
        if any(o.kind in ("no_answer", "canceled") for o in self.outcomes):
            return "no_answer"
        return "failed"

    async def _leg(self, leg) -> None:
        """Dial one target; it talks (screening, then the bridge) through `_talk`."""
        rung = self.by_target.get(leg.target)
        sip = self.ua.place(
            sip_call_id=leg.sip_call_id,
            to=leg.target,
            caller=self.caller,
            audio={},
            ring_timeout=rung.seconds if rung is not None else self.ring_seconds,
            max_seconds=settings.SIP_MAX_CALL_SECONDS,
            on_ringing=_nothing,
            on_answered=_nothing,
            talk=lambda answered: self._talk(leg, answered),
            headers=self.headers,
        )
        self.sips[leg.target] = sip
        duration = 0
        try:
            if self.party_gone or self.bridge_over.is_set():
                return  # the party hung up before this leg was dialled
            outcome = await sip.run()
            self.outcomes.append(outcome)
            if self.winner.done() and self.winner.result()[0] is leg:
                duration = max(0, round(outcome.duration or 0))
            logger.info(
                "%s: leg %s ended: %s %s",
                self.label,
                sip.sip_call_id,
                outcome.kind,
                outcome.code or "",
            )
        except Exception:
            logger.exception("%s: leg %s failed", self.label, leg.pk)
        finally:
            with contextlib.suppress(Exception):
                await self.ledger.ended(leg, duration)
            self.leg_done()

    async def _browser_leg(self, rung: RingTarget) -> None:
        """Ring a person's tabs; the first whose connection is up is offered to win, and
        talks until the bridge is over or it leaves. Every tab still ringing is told why it
        stops (telephony.webrtc.ring)."""
        ring = rung.ring
        self.sips[rung.key] = ring  # hung up as a phone's leg is, when another wins
        reason = "no_answer"
        try:
            law = self.party.law  # a tab is answered in the caller's: relayed as it comes
            if self._may_win() and await ring.ring(rung.seconds, law=law) and self._may_win():
                won_by = BrowserTarget(user_id=rung.member, entry=rung.entry, key=rung.key)
                self.winner.set_result((won_by, ring))
                await race(ring.talking(), self.bridge_over.wait())
        except Exception:
            logger.exception("%s: the browsers' ring failed", self.label)
        finally:
            if getattr(ring, "removed", False):
                reason = "removed"  # the person left the number as it rang them
            elif self.winner.done() and self.winner.result()[1] is not ring:
                reason = "answered_elsewhere"
            elif self.party_gone or self.winner.done():
                reason = "caller_hung_up"
            with contextlib.suppress(Exception):
                await ring.close(reason)
            self.leg_done()

    def _may_win(self) -> bool:
        return not (self.winner.done() or self.party_gone or self.bridge_over.is_set())

    async def _talk(self, leg, sip: OutboundCall) -> None:
        """An answered leg: screened if asked, then offered to win; the winner talks until the
        bridge is over. Returning hangs the leg up."""
        if self.screen is not None and not await self.screen(sip):
            return
        if self.winner.done() or self.party_gone or self.bridge_over.is_set():
            return
        self.winner.set_result((leg, sip))
        await self.bridge_over.wait()

    async def _bridge(self, leg, sip: OutboundCall) -> DialResult | None:
        """Answer the party if it still rings, and relay the two legs' media until either
        hangs up or the cap. None when nothing was bridged after all (the owner has no
        answered seconds left, or the party left as it was answered): the leg is hung up."""
        winning = getattr(leg, "key", leg.target)
        for target, other in self.sips.items():
            if target != winning:
                other.hang_up(reason=COMPLETED_ELSEWHERE)
        grant = await self.ledger.bridged(leg)
        if grant == 0:
            logger.info("%s: no answered seconds left to bridge", self.label)
            return None
        if not await self.answer():  # the party hung up a moment ago
            await self.ledger.unbridged(leg)
            self.party_gone = True
            return None
        party_stream, target_stream = self.party.stream, sip.stream
        for stream in (party_stream, target_stream):  # a phone's, or a browser's (issue 58)
            stream.music_source = self.music
        leg_over = self.tasks[winning]  # the leg's own task: it goes on to its end
        recording = await self._record_start(party_stream, target_stream, leg_over)
        bridged = time.monotonic()
        party_stream.bridge, target_stream.bridge = target_stream, party_stream
        recorder = recording and recording.start()
        cap = settings.SIP_MAX_CALL_SECONDS
        if grant is not None:
            cap = min(cap, grant)
        transfer = None
        try:
            refer = await self._bridged(leg_over, sip, cap)
        finally:
            if recorder is not None:  # what is recorded is this bridge, not a transfer's
                await asyncio.shield(recording.end())
        while refer is not None:
            if self.party_gone:
                await refer.notify(487, "Request Terminated")  # the caller left as it came
                break
            self._log_bridge(round(time.monotonic() - bridged), party_stream, target_stream)
            if isinstance(refer, Consulted):
                # The tab consults someone first (an attended transfer from the browser
                # phone): the caller holds meanwhile, and the consultation ends with the
                # caller handed on to its target, or back here.
                transfer = await self.transfer.consult(refer, sip, leg_over)
            else:
                # The target handed the call on: the caller goes to the transfer's target,
                # and the target's leg stays up until that call's final response is told to
                # it.
                transfer = await self.transfer.run(refer, sip)
            self.party_gone = self.party_gone or _ended(self.party)
            if not self._back_to_transferor(refer, transfer, leg_over):
                break
            # An attended transfer the target did not take (or a consultation that ended
            # without the handing on): the caller and the transferor are bridged again, as
            # before the REFER (the transferor still on the line).
            logger.info("%s: the transfer was not taken; back to the transferor", self.label)
            transfer = None
            party_stream.bridge, target_stream.bridge = target_stream, party_stream
            refer = await self._bridged(leg_over, sip, cap - (time.monotonic() - bridged))
        self.bridge_over.set()
        sip.hang_up()
        duration = max(0, round(time.monotonic() - bridged))
        if transfer is not None:
            return DialResult("completed", target=leg.target, duration=duration, transfer=transfer)
        self._log_bridge(duration, party_stream, target_stream)
        return DialResult("completed", target=leg.target, duration=duration)

    async def _bridged(self, leg_over: asyncio.Future, sip, cap: float):
        """The bridge as it is, until the leg or the party ends it, `cap` seconds pass, or
        the leg hands the call on: then the Refer (the bridge undone), else None."""
        referred = self._referable(sip)
        listening = (
            asyncio.ensure_future(self.transfer.listen(referred))
            if self.transfer is not None
            else None
        )
        party_stream, target_stream = self.party.stream, sip.stream
        try:
            _leg, party_over, refer = await race(
                leg_over, self.gone(), referred, timeout=max(0.0, cap), keep=(leg_over,)
            )
            self.party_gone = won(party_over)
        finally:
            party_stream.bridge = target_stream.bridge = None
            sip.on_refer = None
            if hasattr(sip, "on_consult"):
                sip.on_consult = None
            if listening is not None:
                listening.cancel()
        return refer.result() if won(refer) else None

    def _back_to_transferor(self, refer, transfer: DialResult, leg_over) -> bool:
        """Whether the caller goes back to the leg that referred: an attended transfer
        (Replaces) the target did not take, the caller and that leg both still there."""
        attended = bool(getattr(refer, "replaces", "")) or isinstance(refer, Consulted)
        return (
            attended
            and transfer.status != "completed"
            and not leg_over.done()
            and not _ended(self.party)
        )

    def _log_bridge(self, duration: int, party_stream, target_stream) -> None:
        logger.info(
            "%s: bridged %d s (caller %s, target %s); relayed %d packets to the target, %d to "
            "the caller",
            self.label,
            duration,
            sdp.CODECS.get(party_stream.payload_type),
            sdp.CODECS.get(target_stream.payload_type),
            target_stream.relayed_packets,
            party_stream.relayed_packets,
        )

    def _referable(self, sip) -> asyncio.Future:
        """A future set to the Refer (telephony.sip.refer) the bridged `sip` leg sends and
        the transfer takes: a REFER to a target `transfer.check` refuses is answered with its
        refusal, and the bridge goes on. `transfer.listen` may set it too (a transfer asked
        for by the API or the browser phone, for a phone's leg or a tab's). Never set when
        the dial has no transfer."""
        referred: asyncio.Future = asyncio.get_running_loop().create_future()
        if self.transfer is not None and hasattr(sip, "on_consult"):
            # A tab (telephony.webrtc.ring): its Consult (the socket checked it) ends the
            # bridge as a REFER does; its Complete and Cancel belong to the consultation.
            def on_consult(kind: str, message: dict) -> None:
                target = message.get("to")
                if kind == "rtc.consult" and isinstance(target, str) and not referred.done():
                    referred.set_result(Consulted(target=target))

            sip.on_consult = on_consult
        if self.transfer is None or not isinstance(sip, OutboundCall):
            return referred

        async def on_refer(refer) -> Refusal | None:
            if referred.done():
                return Refusal(491, "Request Pending (a transfer is under way)")
            refusal = await self.transfer.check(refer.target)
            if refusal is None and not referred.done():
                referred.set_result(refer)
            return refusal

        sip.on_refer = on_refer
        return referred

    async def _record_start(self, party_stream, target_stream, leg_over) -> _Recording | None:
        """A bridge to record: the announcement played to both parties (until either leaves),
        then the recording's row; None when the bridge is not recorded (not asked for). Either
        end may be a phone's RtpStream or a browser's tab (telephony.webrtc.leg.BrowserStream,
        issue 58): each plays the announcement in its own G.711 law (`law`) and hands the
        recorder what it hears (`on_bridged`)."""
        recorded = self.recorded
        if recorded is None:
            return None
        try:
            audio = await recorded.announcement()
        except Exception:
            logger.exception("%s: the recording's announcement could not be spoken", self.label)
            audio = {}
        plays = [
            asyncio.ensure_future(s.play(audio.get(s.law, b"")))
            for s in (party_stream, target_stream)
        ]
        try:
            _played, _leg, gone = await race(
                asyncio.wait(plays), leg_over, self.gone(), keep=(leg_over,)
            )
        finally:
            for play in plays:
                play.cancel()
        if leg_over.done() or won(gone):
            return None  # a party left during the announcement: no bridge to record
        logger.info("%s: the recording announced to both parties", self.label)
        try:
            row, path = await recorded.open()
        except Exception:
            logger.exception("%s: the recording could not begin", self.label)
            return None
        return _Recording(recorded, row, path, party_stream, target_stream, self.label)


class Transfer(Protocol):
    """What a dial's bridged target may hand the call on to (REFER, RFC 3515): `check(target)`
    the refusal a target earns now (the dialing policy, the quotas), else None; `run(refer,
    sip)` dials the target for the party, tells the referring leg `sip` how it goes, ends
    that leg, and returns how the transfer's dial went; `listen(referred)`, while bridged,
    sets `referred` to a transfer asked for from elsewhere (the API, the browser phone)."""

    async def check(self, target: str) -> Refusal | None: ...

    async def listen(self, referred: asyncio.Future) -> None: ...

    async def run(self, refer, sip: OutboundCall) -> DialResult: ...

    async def consult(self, asked: Consulted, ring, ring_over: asyncio.Future) -> DialResult:
        """The tab of `ring` consults `asked.target` with the party on hold: how the
        consultation's dial went (`completed`: the party was handed on to the target and
        that bridge is over; else the tab has the party back, when both are there)."""
        ...


@dataclass(frozen=True)
class Asked:
    """A transfer asked for from the API or the browser phone (telephony.inbound.transfer):
    the target, and no REFER subscription to tell how it goes."""

    target: str

    async def notify(self, status: int, reason: str) -> None:
        return None


@dataclass(frozen=True)
class Consulted(Asked):
    """A tab's Consult (an attended transfer from the browser phone, issue 58): an Asked
    whose target the tab talks with before the party is handed on."""


def _ended(party) -> bool:
    """Whether the party's call has ended (a party with no `ended` never says so)."""
    ended = getattr(party, "ended", None)
    return ended is not None and ended.is_set()


class _Recording:
    """One recorded bridge: the recorder tapping both streams from start() to end()."""

    def __init__(self, recorded: Recorded, row, path: str, party, target, label: str) -> None:
        self.recorded, self.row, self.path, self.label = recorded, row, path, label
        self.streams = (party, target)
        self.recorder: CallRecorder | None = None

    def start(self) -> CallRecorder:
        self.started = time.monotonic()
        self.recorder = recorder = CallRecorder(self.path, label=self.label)
        party, target = self.streams
        party.on_bridged, target.on_bridged = recorder.tap(CALLER), recorder.tap(OTHER)
        return recorder

    async def end(self) -> None:
        for stream in self.streams:
            stream.on_bridged = None
        recorder = self.recorder
        bridge = time.monotonic() - self.started
        await recorder.close()
        logger.info(
            "%s: recorded %.2f s of a %.2f s bridge%s",
            self.label,
            recorder.seconds,
            bridge,
            " (incomplete)" if recorder.incomplete else "",
        )
        try:
            await self.recorded.done(self.row, recorder.seconds, recorder.incomplete)
        except Exception:
            logger.exception("%s: the recording could not be stored", self.label)


@dataclass(frozen=True)
class BrowserTarget:
    """The ledger's leg of the target "browser": no row (no trunk call, no quota), only its
    name, whose tabs took the call (`user_id`; None: the owner's) and by which ring list
    entry; Ledger.bridged and .unbridged are told of it as of a phone's leg."""

    target: str = BROWSER
    pk: None = None
    user_id: object = None
    entry: int | None = None
    key: str = BROWSER


async def _nothing() -> None:
    return None


def number_music(speech: Speech, name: str) -> Callable[[int], Awaitable[bytes | None]] | None:
    """A number's uploaded music on hold (`name` in the recordings storage; "": none) as a
    bridged stream plays it in place of Relay's own (rtp.Holding.music_source): G.711 in
    the stream's law, converted by sox the first time a call plays it and kept by the speech
    cache under its name (a new upload is a new name). None from it when the file cannot be
    read: Relay's own plays, and a WARNING says so."""
    if not name:
        return None

    def fetch() -> bytes:
        with recordings_storage().open(name, "rb") as wav:
            return wav.read()

    async def music(payload_type: int) -> bytes | None:
        try:
            audio = await asyncio.to_thread(
                speech.clip,
                f"hold-music:{name}",
                fetch,
                max_seconds=settings.HOLD_MUSIC_MAX_SECONDS + 1,
            )
        except (OSError, SpeechError):
            logger.warning("a number's music on hold could not be played; Relay's own plays")
            return None
        return audio.get(payload_type)

    return music


def number_music_read(
    speech: Speech, db: Callable, number_id
) -> Callable[[int], Awaitable[bytes | None]] | None:
    """The music on hold of the number a call carries (`number_id`; None: the call has none,
    and Relay's own plays), for a bridge whose number is not at hand (an outbound call's:
    from the browser, or a script's dial): the number's file is read from the database
    (`db`, the agent's thread) as a call holds, so nothing is read while nobody holds, and a
    music changed since the call began is the one heard."""
    if number_id is None:
        return None

    async def music(payload_type: int) -> bytes | None:
        try:
            name = await db(services.number_hold_music)(number_id=number_id)
        except DatabaseError:
            logger.warning("a number's music on hold could not be read; Relay's own plays")
            return None
        played = number_music(speech, name)
        return None if played is None else await played(payload_type)

    return music


class LegPlaces:
    """The places of an agent's capacity that scripts' dial legs hold: `room()` says how many
    more calls the agent may take (these places already counted)."""

    def __init__(self, room: Callable[[], int]) -> None:
        self.room = room
        self.held = 0

    def take(self, wanted: int) -> int:
        """Hold up to `wanted` places; how many were held (each given back by give())."""
        taken = max(0, min(wanted, self.room()))
        self.held += taken
        return taken

    def give(self) -> None:
        self.held -= 1


@dataclass
class Dialing:
    """What a script's `dial` needs of the agent and of the call it runs on: the user agent;
    the agent's places; `ledger(n)`, the ledger of the call's n-th dial; the legs' From user
    and headers by the verb's callerId; `gone()`, awaitable once the call has ended; `music`,
    the call's number's music on hold (number_music)."""

    ua: object
    places: LegPlaces
    ledger: Callable[[int], Ledger]
    caller_ids: dict[str, tuple[str, tuple[tuple[str, str], ...]]]
    gone: Callable[[], Awaitable]
    recorded: Callable[[], Recorded] | None = None  # a `dial` with `record: true` (issue 58)
    # The music either end of its bridge hears while the other holds: the number's (issue
    # 58); None: Relay's own.
    music: Callable[[int], Awaitable[bytes | None]] | None = None


def script_ledger(db: Callable, *, owner_id, dial: int, call) -> Ledger:
    """The ledger of a script's n-th `dial` (`dial`) on `call` (inbound or outbound): its
    `dial_target` legs (calls.Leg, telephony.services.dial_legs_open)."""
    return Ledger(
        open=lambda sip_call_ids: db(services.dial_legs_open)(
            owner_id=owner_id,
            targets=list(sip_call_ids),
            sip_call_ids=sip_call_ids,
            call=call,
            dial=dial,
        ),
        bridged=lambda leg: db(services.dial_leg_bridged)(leg=leg),
        unbridged=lambda leg: db(services.dial_leg_unbridged)(leg=leg),
        ended=lambda leg, duration: db(services.leg_ended)(leg=leg, duration=duration),
    )


def recorded_for(db: Callable, speech, *, call_id, announce: str = "") -> Recorded:
    """The recording of a bridge of the call `call_id` (history.recordings), announced by
    `announce` (empty: RECORDING_ANNOUNCEMENT) spoken through the speech cache."""
    text = announce or settings.RECORDING_ANNOUNCEMENT
    return Recorded(
        announcement=lambda: asyncio.to_thread(speech.render, text, settings.TTS_DEFAULT_LANGUAGE),
        open=lambda: db(recordings.call_recording_open)(call_id=call_id),
        done=lambda row, seconds, incomplete: db(recordings.call_recording_done)(
            recording=row, seconds=seconds, incomplete=incomplete
        ),
    )


def diversion(ua, number: str) -> tuple[tuple[str, str], ...]:
    """The Diversion header (RFC 5806) of a leg dialled on behalf of a call to `number`,
    with the caller as its From."""
    return (("Diversion", f"<{ua.scheme}:{number}@{ua.host}>;reason=unconditional;counter=1"),)


async def any_of(*events: asyncio.Event) -> None:
    """Wait until any of `events` is set."""
    await race(*(event.wait() for event in events))
