"""The telephony agent: the process that places calls over SIP (`manage.py telephony_agent`).

Each agent claims due calls itself, as many as SIP_MAX_CONCURRENT_CALLS at once. A claim
(realtime.services.calls_claim) is the pipeline's conditional move `queued -> dialing`,
committed before anything is sent: of several agents only one wins a call, and a call that
was marked dialed is never dialed again (if the agent dies, recovery ends it
`failed`/`agent_lost`). Then the agent makes the call ready by its kind (telephony.outbound:
a message rendered, a script, a browser's leg), places it through the trunk, and reports
each change through the same transitions as every other provider. While it holds calls it
pushes their deadlines forward (the heartbeat, realtime.services.calls_extend); a row that
ends elsewhere (the user's cancel, recovery: realtime.selectors.calls_ended) is hung up at
once. The agent reads and writes Call rows only through realtime.

The ORM runs in one thread with one connection kept open (Django is synchronous; a new
PostgreSQL connection every 50 ms would cost more than the queries); SIP and RTP run on the
event loop. A database outage is logged and waited out, never the end of the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field, replace

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from calls.models import Call
from calls.states import CallState
from realtime import pipeline
from realtime.providers import QUOTA_REASON, Step, quota_cut
from realtime.selectors import calls_ended
from realtime.services import call_recording_add, calls_claim, calls_extend
from telephony import services
from telephony.dial import (
    Dialing,
    LegPlaces,
    any_of,
    number_music_read,
    recorded_for,
    script_ledger,
)
from telephony.inbound.routing import InboundDesk
from telephony.outbound import BrowserRun, MessageRun, OutboundRun, ScriptedRun
from telephony.outbound_transfer import BrowserCallTransfer
from telephony.sip.message import new_sip_call_id
from telephony.sip.ua import OutboundCall, Outcome, RegistrationError, UaConfig, UserAgent
from telephony.speech import Speech
from telephony.webrtc.leg import agent_rtc_ports

logger = logging.getLogger(__name__)

DATABASE_RETRY = 1.0  # seconds between attempts while the database is unreachable
SHUTDOWN_GRACE = 5.0  # seconds for CANCEL/BYE transactions when the agent stops
AGAIN_SECONDS = 2.0  # a second signal this long after the first stops a draining agent now
REGISTER_RETRY = 30.0


def _in_db_thread(function):
    """`function` run in the agent's one database thread, on a connection kept open; a
    connection that failed is closed, so the next call opens a fresh one."""

    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except DatabaseError:
            connection.close()
            raise

    return sync_to_async(run, thread_sensitive=True)


@dataclass
class LiveCall:
    record: Call
    status: str = CallState.DIALING
    sip: OutboundCall | None = None
    ended_elsewhere: bool = False
    stopped: bool = False
    # The seconds the plan's quota granted, when short of the message: hung up there.
    quota_limit: int | None = None
    task: asyncio.Task | None = field(default=None, repr=False)

    def hang_up(self) -> None:
        if self.sip is not None:
            self.sip.hang_up()


def final_step(outcome: Outcome, *, stopped: bool = False, talk_limit: int | None = None) -> Step:
    """The pipeline's last step for a call that SIP ended (docs/telephony.md's table). With
    `talk_limit` (the call was granted less than its talk) a hang-up at the limit is the
    quota's: `completed`, reason `quota`, never more than the seconds granted."""
    duration = None if outcome.duration is None else max(0, round(outcome.duration))
    if stopped:
        return Step(status=CallState.FAILED, reason="agent_stopped", duration=duration)
    if outcome.kind == "answered" and outcome.hung_up_by == "limit" and talk_limit is not None:
        return Step(
            status=CallState.COMPLETED, duration=min(duration, talk_limit), reason=QUOTA_REASON
        )
    if outcome.kind == "answered":
        reason = "remote_hangup" if outcome.hung_up_by == "remote" else ""
        return Step(status=CallState.COMPLETED, duration=duration, reason=reason)
    if outcome.kind == "rejected":
        if outcome.code in (486, 600):
            return Step(status=CallState.BUSY, duration=0)
        if outcome.code == 603:
            return Step(status=CallState.FAILED, reason="declined")
        return Step(status=CallState.FAILED, reason=f"{outcome.code} {outcome.phrase}".strip())
    if outcome.kind == "timeout":
        return Step(status=CallState.FAILED, reason="408 Request Timeout")
    if outcome.kind == "no_answer":
        return Step(status=CallState.NO_ANSWER, duration=0)
    if outcome.kind == "canceled":
        return Step(status=CallState.CANCELED, reason="canceled by the user")
    return Step(status=CallState.FAILED, reason=outcome.phrase or "SIP error")


def _log_end(record: Call, outcome: Outcome) -> None:
    """The one line a call's end leaves: how SIP ended it and what its media carried."""
    received = outcome.received
    logger.info(
        "call %s ended: %s %s; audio sent %d packets, received %d packets "
        "(%.2f s, %.2f s of it speech)",
        record.pk,
        outcome.kind,
        outcome.code or "",
        outcome.sent_packets,
        received.packets,
        received.seconds,
        received.speech_seconds,
    )


WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 - compared with, never bound


def _public_host(trunk: tuple[str, int]) -> str:
    """What a wildcard bind advertises when SIP_PUBLIC_ADDRESS is unset: the local address
    that routes to the trunk's (resolved) address."""
    family = socket.AF_INET6 if ":" in trunk[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(trunk)  # no packet is sent: this only picks the route
        return probe.getsockname()[0]


def agent_config(index: int = 0) -> UaConfig:
    """Agent `index`'s SIP endpoint: SIP_BIND's port plus the index, and its own share of
    RTP_PORT_RANGE, so that several agents run side by side on one machine."""
    first, last = settings.RTP_PORTS
    share = (last - first + 1) // settings.SIP_AGENTS
    port = settings.SIP_BIND_PORT + index if settings.SIP_BIND_PORT else 0
    return UaConfig(
        trunk_uri=settings.SIP_TRUNK_URI,
        bind_host=settings.SIP_BIND_HOST,
        bind_port=port,
        transport=settings.SIP_TRANSPORT,
        # For a wildcard bind, found once the trunk is (TelephonyAgent.run): the trunk may be
        # a name only its DNS servers know.
        public_host=settings.SIP_PUBLIC_ADDRESS
        or ("" if settings.SIP_BIND_HOST in WILDCARDS else settings.SIP_BIND_HOST),
        username=settings.SIP_USERNAME,
        password=settings.SIP_PASSWORD,
        rtp_ports=(first + index * share, first + (index + 1) * share - 1),
        media_latching=settings.SIP_MEDIA_LATCHING,
        tls_ca_file=settings.SIP_TLS_CA_FILE,
        tls_cert_file=settings.SIP_TLS_CERT_FILE,
        tls_key_file=settings.SIP_TLS_KEY_FILE,
        srtp=settings.SIP_SRTP,
        dns_servers=tuple(settings.SIP_DNS_SERVERS),
        rtc_ports=agent_rtc_ports(index),
        # The one switch for every address Relay reaches on a user's word (core.urls).
        allow_private_targets=settings.WEBHOOK_ALLOW_PRIVATE,
    )


class TelephonyAgent:
    def __init__(self, *, index: int = 0) -> None:
        self.ua = UserAgent(agent_config(index))
        self.speech = Speech(settings.TTS_CACHE_DIR)
        self.calls_by_pk: dict = {}  # Call pk -> the LiveCall this agent places
        self.stopping = asyncio.Event()
        self.draining = asyncio.Event()  # drain(): no new call; stop once the live ones end
        self.drain_until = 0.0  # the loop's time past which a drain stops what is left
        self.drain_asked = 0.0
        self.capacity = settings.SIP_MAX_CONCURRENT_CALLS
        # Scripts' dial legs hold places of the agent's capacity, whichever call dials them.
        self.places = LegPlaces(room=self._room)
        # Calls to the numbers (telephony/inbound/) share the agent's capacity.
        self.desk = InboundDesk(
            ua=self.ua, speech=self.speech, db=_in_db_thread, room=self._room, places=self.places
        )
        self.next_recovery = 0.0

    def _room(self) -> int:
        return self.capacity - len(self.calls_by_pk) - len(self.desk) - self.places.held

    def drain(self) -> None:
        """Take no new call (an INVITE or OPTIONS gets 503, no outbound call is claimed), keep
        the live ones to their end, then stop; past SIP_DRAIN_SECONDS, stop anyway (the
        calls left are hung up and recorded, as a stop does). Asked again, AGAIN_SECONDS or
        more later: stop now. (One Ctrl-C reaches an agent twice, from the terminal and from
        runrelay; a service manager may signal every process of the service as well.)"""
        now = asyncio.get_running_loop().time()
        if self.draining.is_set():
            if now - self.drain_asked >= AGAIN_SECONDS:
                logger.warning("telephony agent: asked again to stop: hanging up the live calls")
                self.stopping.set()
            return
        self.draining.set()
        self.drain_asked = now
        self.ua.draining = True
        self.drain_until = now + settings.SIP_DRAIN_SECONDS
        logger.warning(
            "telephony agent: draining: new calls refused (503), %d live call(s) kept up to %g s",
            self._live(),
            settings.SIP_DRAIN_SECONDS,
        )

    def _live(self) -> int:
        return len(self.calls_by_pk) + len(self.desk.tasks)

    async def run(self) -> None:
        await self.ua.start()
        if not self.ua.config.public_host:
            self.ua.config = replace(self.ua.config, public_host=_public_host(self.ua.trunk))
        host, port = self.ua.local
        logger.info(
            "telephony agent: SIP/%s on %s:%s (advertised as %s), trunk %s, up to %s calls",
            self.ua.transport.name,
            host,
            port,
            self.ua.host,
            "{}:{}".format(*self.ua.trunk),  # never the URI: it may carry a password
            self.capacity,
        )
        heartbeat = asyncio.create_task(self._heartbeat())
        registration = (
            asyncio.create_task(self._keep_registered()) if settings.SIP_REGISTER else None
        )
        try:
            while not self.stopping.is_set():
                try:
                    await self._tick()
                except DatabaseError as exc:
                    logger.warning("database unavailable, retrying: %s", type(exc).__name__)
                    await asyncio.sleep(DATABASE_RETRY)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), settings.SIP_POLL_INTERVAL)
        finally:
            heartbeat.cancel()
            if registration is not None:
                registration.cancel()
            await self._shutdown()
            await self.ua.close()

    async def _tick(self) -> None:
        if self.draining.is_set():
            loop = asyncio.get_running_loop()
            if not self._live() or loop.time() >= self.drain_until:
                if self._live():
                    logger.warning(
                        "telephony agent: SIP_DRAIN_SECONDS passed with %d live call(s)",
                        self._live(),
                    )
                else:
                    logger.warning("telephony agent: drained: no live call left")
                self.stopping.set()
                return
        if self.calls_by_pk:
            for pk in await _in_db_thread(calls_ended)(pks=list(self.calls_by_pk)):
                live = self.calls_by_pk.get(pk)
                if live is not None and not live.ended_elsewhere:
                    live.ended_elsewhere = True
                    live.hang_up()
        loop = asyncio.get_running_loop()
        if loop.time() >= self.next_recovery:
            self.next_recovery = loop.time() + settings.CALL_RECOVERY_INTERVAL
            if recovered := await _in_db_thread(services.inbound_calls_recover)():
                logger.warning("recorded %d inbound call(s) of an agent that died", recovered)
            if settled := await _in_db_thread(services.dial_legs_settle)():
                logger.warning("ended %d dial leg(s) of calls whose agent died", settled)
        free = 0 if self.draining.is_set() else self._room()
        if free > 0:
            claimed = await _in_db_thread(calls_claim)(
                limit=free, sip_call_id=lambda: new_sip_call_id(self.ua.host)
            )
            for record in claimed:
                live = LiveCall(record=record)
                self.calls_by_pk[record.pk] = live
                live.task = asyncio.create_task(self._run_call(live))

    async def _move(self, live: LiveCall, step: Step) -> bool:
        moved = await _in_db_thread(pipeline.call_transition)(
            call=live.record, step=step, expected_status=live.status
        )
        if moved:
            live.status = step.status
        elif not live.ended_elsewhere:
            # The row ended elsewhere (canceled, or failed by recovery): hang up now.
            live.ended_elsewhere = True
            live.hang_up()
        return moved

    async def _answered(self, live: LiveCall, *, planned: float) -> None:
        """in_progress, granted its talk by the plan's quota: a grant short of the message
        hangs the call up at the grant."""
        if await self._move(live, Step(status=CallState.IN_PROGRESS, talk=planned)):
            grant = live.record.talk_limit
            if grant is not None and quota_cut(live.record, planned):
                live.quota_limit = grant
                live.sip.max_seconds = min(live.sip.max_seconds, grant)

    def _run_of(self, live: LiveCall) -> OutboundRun:
        """The kind of call `live` is (telephony.outbound), chosen once: a call from the
        browser (it brings an offer), a scripted call, or a message."""
        record = live.record
        if record.rtc_offer:
            music = self._music(record)
            transfer = BrowserCallTransfer(ua=self.ua, db=_in_db_thread, record=record, music=music)
            return BrowserRun(
                record, ports=self.ua.config.rtc_ports, music=music, transfer=transfer
            )
        if record.script is not None:
            return ScriptedRun(
                record,
                speech=self.speech,
                report=self._reporter(live),
                store=self._keeper(live),
                dialing=self._dialing(live),
                detected=self._detected(live),
            )
        return MessageRun(record, speech=self.speech, detected=self._detected(live))

    async def _run_call(self, live: LiveCall) -> None:
        """Place `live` and see it to its last step, whatever its kind: made ready, dialled,
        reported through the pipeline, and its end written unless it ended elsewhere."""
        record = live.record
        run = self._run_of(live)
        try:
            if (failed := await run.ready()) is not None:
                await self._move(live, failed)
                return
            if live.stopped:
                await self._move(live, Step(status=CallState.FAILED, reason="agent_stopped"))
            if live.ended_elsewhere or live.stopped:
                return
            live.sip = self.ua.place(
                sip_call_id=record.sip_call_id,
                to=record.to,
                caller=record.caller_id,
                audio=run.audio,
                ring_timeout=settings.SIP_RING_TIMEOUT,
                max_seconds=settings.SIP_MAX_CALL_SECONDS,
                on_ringing=lambda: self._move(live, Step(status=CallState.RINGING)),
                on_answered=lambda: self._answered(live, planned=run.planned()),
                talk=run.talk,
            )
            run.placed(live.sip)
            outcome = await live.sip.run()
            _log_end(record, outcome)
            if not live.ended_elsewhere:
                step = final_step(outcome, stopped=live.stopped, talk_limit=live.quota_limit)
                if run.ended_by and step.status == CallState.COMPLETED:
                    step = replace(step, reason=run.ended_by)  # a limit of the script
                await self._move(live, step)
        except Exception:
            logger.exception("call %s: the agent failed", record.pk)
            with contextlib.suppress(Exception):
                await self._move(live, Step(status=CallState.FAILED, reason="agent error"))
        finally:
            await run.close()
            self.calls_by_pk.pop(record.pk, None)

    def _reporter(self, live: LiveCall):
        """What a scripted call's verbs report, written in the database thread, at the call's
        state (realtime.pipeline.calls_reported); a write that fails is logged, and the call
        goes on."""

        def write(reports: list[dict]) -> None:
            with transaction.atomic():
                pipeline.calls_reported(call=live.record, reports=reports)

        async def report(reports: list[dict]) -> None:
            if not reports:
                return
            try:
                await _in_db_thread(write)(reports)
            except DatabaseError:
                logger.warning("call %s: what its script reported was not written", live.record.pk)

        return report

    def _detected(self, live: LiveCall):
        """What machine detection decided (telephony.detection), written in the database
        thread as the call's `answeredBy` and a `detected` event; a write that fails is
        logged, and the call goes on."""

        async def detected(decision) -> None:
            logger.info(
                "call %s: answered by %s (%s, %.2f s)",
                live.record.pk,
                decision.answered_by,
                decision.reason,
                decision.at,
            )
            try:
                await _in_db_thread(pipeline.call_answered_as)(
                    call=live.record, answered_by=decision.answered_by, heard=decision.reason
                )
            except DatabaseError:
                logger.warning("call %s: who answered was not written", live.record.pk)

        return detected

    def _dialing(self, live: LiveCall) -> Dialing:
        """What a scripted call's `dial` needs: its legs are rows of the call, From its own
        caller ID whatever the verb's callerId (the call's caller is Relay)."""
        record = live.record
        return Dialing(
            ua=self.ua,
            places=self.places,
            ledger=lambda dial: script_ledger(
                _in_db_thread, owner_id=record.owner_id, dial=dial, call=record
            ),
            caller_ids={"number": (record.caller_id, ()), "caller": (record.caller_id, ())},
            gone=lambda: any_of(live.sip.remote_hangup, live.sip.hangup_requested),
            recorded=lambda: recorded_for(_in_db_thread, self.speech, call_id=record.pk),
            music=self._music(record),
        )

    def _music(self, record: Call):
        """The music on hold of outbound call `record`'s bridge: its number's, the one it
        calls from (read as a call holds); Relay's own for a call that carries none."""
        return number_music_read(self.speech, _in_db_thread, record.number_id)

    def _keeper(self, live: LiveCall):
        """Where a scripted call's recordings are kept: a row of the call each
        (realtime.services.call_recording_add), written in the database thread."""

        async def store(recording_id, name: str, seconds: float) -> None:
            await _in_db_thread(call_recording_add)(
                call=live.record, recording_id=recording_id, name=name, seconds=seconds
            )

        return store

    async def _keep_registered(self) -> None:
        """REGISTER with the trunk, and again at half the granted expiry; after a failure,
        again in REGISTER_RETRY seconds. Calls are placed meanwhile all the same."""
        while True:
            try:
                granted = await self.ua.register(expires=settings.SIP_REGISTER_EXPIRES)
            except (RegistrationError, OSError) as exc:
                logger.warning("registration with the trunk failed: %s", exc)
                await asyncio.sleep(REGISTER_RETRY)
                continue
            logger.info("registered with the trunk for %s s", granted)
            await asyncio.sleep(max(10, granted / 2))

    async def _heartbeat(self) -> None:
        """Keep the deadlines of held calls ahead, so recovery leaves them alone while this
        agent lives, and takes them (agent_lost) soon after it dies."""
        interval = pipeline.call_heartbeat_interval()
        while True:
            await asyncio.sleep(interval)
            try:
                if held := [*self.calls_by_pk, *self.desk.ledger_pks()]:
                    await _in_db_thread(calls_extend)(pks=held)
            except DatabaseError as exc:
                logger.warning("heartbeat failed: %s", type(exc).__name__)

    async def _shutdown(self) -> None:
        inbound = asyncio.ensure_future(self.desk.stop(SHUTDOWN_GRACE))
        for live in list(self.calls_by_pk.values()):
            live.stopped = True
            live.hang_up()
        tasks = [live.task for live in self.calls_by_pk.values() if live.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
        await inbound
