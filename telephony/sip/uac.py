"""The calling side of a SIP call (RFC 3261 §13.2, §17.1.1): Relay dials through the trunk,
plays the message once the callee answers, and hangs up.

The INVITE client transaction is transaction.InviteClient, on the user agent's loop: it
resends the INVITE over UDP (timer A) until a response, gives up at timer B, and ACKs a
non-2xx final response itself (same branch). The call gives up sooner at its ring timeout. A
2xx is ACKed here, as a request of the dialog (§13.2.2.4), and ACKed again whenever it is
resent. CANCEL only after a provisional response (§9.1). A 401/407 challenge is answered
once, with the next CSeq.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telephony.sip import sdp
from telephony.sip.dialog import ALLOW, Dialog, contact_uri
from telephony.sip.dns import public_address
from telephony.sip.message import Message, host_port_of, new_branch, new_sip_call_id, new_tag
from telephony.sip.race import race, won
from telephony.sip.rtp import ReceivedAudio, RtpStream
from telephony.sip.transaction import (
    Action,
    CancelSent,
    Deliver,
    Failed,
    InviteClient,
    TimedOut,
)
from telephony.sip.transport import TransportError

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """How a call ended, as SIP saw it.

    kind: answered (then `duration`, `hung_up_by`), rejected (`code`, `phrase`), timeout (no
    response at all), no_answer (rang past the ring timeout, canceled), canceled (hung up by
    us before an answer), error (`phrase` says what).
    """

    kind: str
    code: int = 0
    phrase: str = ""
    duration: float | None = None
    # For answered calls: "remote" (their BYE), "local" (our BYE: the message was said, or a
    # hang-up was asked for) or "limit" (our BYE at max_seconds).
    hung_up_by: str = ""
    received: ReceivedAudio = field(default_factory=ReceivedAudio)
    sent_packets: int = 0


TALK_STOP_SECONDS = 5.0  # what a stopped talk may take to finish (saving a recording)


class OutboundCall(Dialog):
    """One outbound call. `run()` dials, reports ringing and answer through the callbacks,
    plays `audio` (G.711 by payload type) once, hangs up, and returns the Outcome.
    `hang_up()` ends it from outside: CANCEL while it rings, BYE once answered.

    Given `talk`, the answered call runs `talk(call)` instead of playing `audio`, and hangs
    up when it returns (a forwarded call's leg: screening, then the bridge). `headers` are
    added to the INVITE (a forwarded call's Diversion)."""

    def __init__(
        self,
        ua,
        *,
        sip_call_id: str = "",
        to: str,
        caller: str,
        audio: dict[int, bytes],
        ring_timeout: float,
        max_seconds: float,
        on_ringing: Callable[[], Awaitable[None]],
        on_answered: Callable[[], Awaitable[None]],
        talk: Callable[[OutboundCall], Awaitable[None]] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        # A SIP URI (a ring list's sip: entry) is dialled directly, as it is: its host's
        # targets (RFC 3263), never the trunk, whose number rewriting and credentials are for
        # the trunk alone. Anything else is a number, dialled through the trunk.
        self.direct = to.lower().startswith(("sip:", "sips:"))
        if self.direct:
            request_uri, host = to, ua.host
        else:
            trunk_host, trunk_port = host_port_of(ua.config.trunk_uri, ua.default_port)
            host = trunk_host if trunk_port == ua.default_port else f"{trunk_host}:{trunk_port}"
            request_uri = f"{ua.scheme}:{to}@{host}"
        super().__init__(
            ua,
            sip_call_id=sip_call_id or new_sip_call_id(ua.host),
            local_header=f"<{ua.scheme}:{caller}@{host}>;tag={new_tag()}",
            remote_header=f"<{request_uri}>",
            remote_target=request_uri,
            local_cseq=1,
        )
        self.request_uri = request_uri
        self.audio = audio
        self.ring_timeout, self.max_seconds = ring_timeout, max_seconds
        self.on_ringing, self.on_answered = on_ringing, on_answered
        # on_ringing's report, under way beside the INVITE transaction: a report (a database
        # write, which waits its turn when many calls ring at once) never holds up the
        # answer's ACK and message; the answer's report and the outcome wait for it instead.
        self.ringing_report: asyncio.Future | None = None
        self.talk, self.headers = talk, headers
        self.remote_hangup = asyncio.Event()
        self.hangup_requested = asyncio.Event()
        self.cancel_pending = False
        self.cancel_reason = ""  # the CANCEL's Reason header (hang_up), if any
        self.stream: RtpStream | None = None
        self.rtp_port = 0
        self.crypto: sdp.Crypto | None = None  # our SRTP key, when SRTP is offered
        # The trunk target this call's INVITE transaction goes to (_dial), and whether any
        # provisional response came from it: then the call is never tried elsewhere.
        self.destination: tuple[str, int] | None = None
        self.provisional_seen = False
        self.confirmed = False  # by a 2xx (_confirm): any 2xx after it is one resent

    @property
    def local_crypto(self) -> sdp.Crypto | None:
        return self.crypto

    @property
    def established(self) -> bool:
        return self.confirmed

    def accepts_peer(self, host: str) -> bool:
        """A request that moves the call may come from the trunk's hosts, or from the host
        this call's INVITE went to (a SIP URI dialled directly)."""
        return super().accepts_peer(host) or (
            self.destination is not None and host == self.destination[0]
        )

    def next_hop(self) -> tuple[str, int]:
        """Where a request in the dialog goes (the ACK of a 2xx, BYE, a NOTIFY...): as any
        dialog's, but for a SIP URI dialled directly (a user's word) whose private addresses
        are not allowed, only to an address checked: the route's or Contact's when it is a
        public IP address or the one the INVITE went to, else that one (a name there would
        be resolved again, unchecked; a private Contact is the peer behind a NAT)."""
        hop = super().next_hop()
        if (
            not self.direct
            or self.ua.config.allow_private_targets
            or self.destination is None
            or hop == self.destination
            or public_address(hop[0])
        ):
            return hop
        logger.debug(
            "call %s: %s:%s unchecked; to %s:%s", self.sip_call_id, *hop, *self.destination
        )
        return self.destination

    def hang_up(self, *, reason: str = "") -> None:
        """CANCEL while it rings, BYE once answered; a CANCEL carries `reason` as its Reason
        header (RFC 3326), the first one given."""
        if reason and not self.cancel_reason:
            self.cancel_reason = reason
        self.hangup_requested.set()

    def on_remote_bye(self) -> None:
        self.remote_hangup.set()

    def on_response(self, response: Message) -> None:
        if response.cseq[1] == "INVITE" and 200 <= response.status < 300:
            # A 2xx resent after its transaction ended: ACK it again (§13.2.2.4).
            asyncio.ensure_future(self.send_ack(response))

    def _teller(self, told: asyncio.Queue[Action]) -> Callable[[Action], None]:
        """What the INVITE transaction tells its TU, for the call to read from `told`; a 2xx
        that comes again once the call has its answer (RFC 6026's Accepted state passes each
        one up) is ACKed again, as one after the transaction is."""

        def tell(report: Action) -> None:
            if isinstance(report, Deliver) and self.confirmed:
                self.on_response(report.message)
            else:
                told.put_nowait(report)

        return tell

    # --- the INVITE transaction's requests -------------------------------------------------------
    def _transaction_request(self, method: str, branch: str, cseq: int, to: str) -> Message:
        """INVITE and CANCEL: sent to the trunk before any dialog exists."""
        message = Message(method=method, uri=self.request_uri)
        message.headers = [
            ("Via", self.ua.via(branch)),
            ("Max-Forwards", "70"),
            ("From", self.local_header),
            ("To", to),
            ("Call-ID", self.sip_call_id),
            ("CSeq", f"{cseq} {method}"),
            ("User-Agent", self.ua.config.user_agent),
        ]
        return message

    def _invite(self, branch: str, authorization: tuple[str, str] | None) -> Message:
        invite = self._transaction_request("INVITE", branch, self.local_cseq, self.remote_header)
        invite.set("Contact", self.ua.contact())
        invite.set("Allow", ALLOW)
        invite.set("Content-Type", "application/sdp")
        for name, value in self.headers:
            invite.set(name, value)
        if authorization:
            invite.set(*authorization)
        invite.body = self.local_sdp
        return invite

    async def send_ack(self, response: Message) -> None:
        """ACK a 2xx: a request of the dialog, with the INVITE's CSeq number (§13.2.2.4)."""
        ack = self.request("ACK", cseq=response.cseq[0])
        await self.ua.send(ack, self.next_hop())

    # --- the call -----------------------------------------------------------------------------
    async def run(self) -> Outcome:
        self.ua.dialogs_by_sip_call_id[self.sip_call_id] = self
        try:
            self.stream = self.ua.new_stream(payload_type=0)
            self.rtp_port = await self.ua.open_rtp(self.stream)
            srtp = self.ua.config.srtp
            self.crypto = sdp.new_crypto() if srtp != "off" else None
            self.local_sdp = sdp.offer(
                address=self.ua.host,
                port=self.rtp_port,
                crypto=self.crypto,
                profile=sdp.SECURE if srtp == "required" else sdp.PLAIN,
            )
            outcome = await self._dial()
        except OSError as exc:
            logger.warning("call %s: %s", self.sip_call_id, exc)
            outcome = Outcome(kind="error", phrase=str(exc)[:120])
        finally:
            if self.stream is not None:
                self.stream.close()
            if self.rtp_port:
                self.ua.release_rtp_port(self.rtp_port)
            # Late retransmissions of a 2xx are still ACKed for a little while.
            self.ua.forget_later(self.sip_call_id)
        await self._ringing_reported()  # the outcome is reported after it
        return outcome

    async def _dial(self) -> Outcome:
        """Try the trunk's targets in order (dns.py), each with a new INVITE transaction:
        a connection that cannot be made (a TLS certificate that does not verify, too), a
        timeout, or a 503 before any provisional response moves on to the next target;
        anything else is the call's outcome. One log line names the target used."""
        if self.direct:
            targets = await self.ua.uri_targets(self.request_uri)
        else:
            targets = await self.ua.trunk_targets()
        for target in targets:
            self.destination = (target.address, target.port)
            try:
                # Over TLS this is the handshake: a peer that does not verify is never sent
                # anything, and never tried over TCP or UDP instead.
                await self.ua.transport.ready(self.destination)
            except TransportError as exc:
                outcome, unreachable = Outcome(kind="error", phrase=str(exc)), True
            else:
                outcome, unreachable = await self._dial_target(), False
            if target is targets[-1] or not self._fails_over(outcome, unreachable=unreachable):
                break
            logger.warning(
                "call %s: trunk target %s failed (%s), trying the next",
                self.sip_call_id,
                target.described(),
                outcome.phrase if unreachable else f"{outcome.code} {outcome.phrase}",
            )
        logger.info("call %s: trunk target %s", self.sip_call_id, target.described())
        return outcome

    def _fails_over(self, outcome: Outcome, *, unreachable: bool) -> bool:
        # RFC 3263 §4.3: "failure occurs if the transaction layer reports a 503 error
        # response [...]. Failure also occurs if the transaction layer times out without
        # ever having received any response, provisional or final [...]. If a failure
        # occurs, the client SHOULD create a new request, which is identical to the
        # previous, but has a different value of the Via branch ID [...]. That request is
        # sent to the next element in the list". Stricter here: once any provisional
        # response came, the call may have reached someone, and a call is placed at most
        # once; and a call the user hung up is not tried again.
        # A target that could not be reached at all got no request: it fails over too.
        if self.provisional_seen or self.hangup_requested.is_set():
            return False
        if unreachable or outcome.kind == "timeout":
            return True
        return outcome.kind == "rejected" and outcome.code == 503

    async def _dial_target(self) -> Outcome:
        """The call through one trunk target: INVITE, and once more with credentials when
        the target challenges it (401/407)."""
        ring_deadline = asyncio.get_running_loop().time() + self.ring_timeout
        authorization = None
        while True:
            invite = self._invite(new_branch(), authorization)
            outcome = await self._invite_transaction(invite, ring_deadline)
            if isinstance(outcome, Outcome):
                return outcome
            # A 401/407 challenge: answered once, with the next CSeq.
            # The trunk's credentials go to the trunk only: a SIP URI's challenge is refused.
            answer = (
                None
                if authorization or self.direct
                else self.ua.credentials(outcome, "INVITE", invite.uri)
            )
            if answer is None:
                return Outcome(kind="rejected", code=outcome.status, phrase=outcome.reason)
            authorization = answer
            self.local_cseq += 1

    async def _invite_transaction(self, invite: Message, ring_deadline: float):
        """Run one INVITE client transaction to its end: an Outcome, or the 401/407 response
        to answer with credentials. The transaction gives up at timer B when nothing answers;
        the call at its ring timeout, if sooner."""
        loop = asyncio.get_running_loop()
        told: asyncio.Queue[Action] = asyncio.Queue()
        transaction = self.ua.client_transaction(
            InviteClient, invite, self.destination, tell=self._teller(told)
        )
        proceeding = ringing = False
        hangup = asyncio.ensure_future(self.hangup_requested.wait())
        try:
            while True:
                wait = ring_deadline - loop.time()
                if wait <= 0:
                    if not proceeding:
                        return Outcome(kind="timeout", code=408, phrase="Request Timeout")
                    return await self._cancel(invite, transaction, told, kind="no_answer")
                getter, _hangup = await race(told.get(), hangup, timeout=wait, keep=(hangup,))
                if hangup.done() and not won(getter):
                    if proceeding:
                        return await self._cancel(invite, transaction, told, kind="canceled")
                    # No provisional response yet: a CANCEL may not be sent (RFC 3261
                    # §9.1); wait for one, or for the transaction to time out.
                    hangup = asyncio.ensure_future(asyncio.Event().wait())
                    self.cancel_pending = True
                    continue
                if not won(getter):
                    continue
                report = getter.result()
                if isinstance(report, TimedOut):  # timer B: no response at all
                    return Outcome(kind="timeout", code=408, phrase="Request Timeout")
                if isinstance(report, Failed):
                    return Outcome(kind="error", phrase=report.reason[:120])
                response = report.message
                if response.status < 200:
                    proceeding = self.provisional_seen = True
                    if response.status in (180, 183) and not ringing:
                        ringing = True
                        self.ringing_report = asyncio.ensure_future(self.on_ringing())
                    if self.cancel_pending:
                        return await self._cancel(invite, transaction, told, kind="canceled")
                    continue
                if response.status < 300:
                    return await self._answered(response)
                # A 3xx-6xx, which the transaction has ACKed (§17.1.1.3).
                if response.status in (401, 407):
                    return response
                return Outcome(kind="rejected", code=response.status, phrase=response.reason)
        finally:
            hangup.cancel()
            # A call that stops waiting before the final response (its ring timeout before
            # any provisional one) leaves the transaction no TU: it ends, and resends no more.
            transaction.abandon()

    async def _cancel(
        self, invite: Message, transaction, told: asyncio.Queue[Action], *, kind: str
    ) -> Outcome:
        """CANCEL a ringing INVITE and see its transaction out (487, which it ACKs). If the
        callee answered in the meantime, the call is ACKed and hung up at once with BYE."""
        # §9.1: the CANCEL's Request-URI, Call-ID, To, CSeq number and From match the INVITE's
        # (the To without the callee's tag), and its Via has the INVITE's branch.
        cancel = self._transaction_request(
            "CANCEL", invite.branch, invite.cseq[0], invite.get("To")
        )
        if self.cancel_reason:
            # RFC 3326 §2: "The Reason header field [...] MAY appear in any request within
            # a dialog, in any CANCEL request and in any response whose status code explicitly
            # allows the presence of this header field."
            cancel.set("Reason", self.cancel_reason)
        await self.ua.request(cancel, self.destination)
        # §9.1: the final response is waited for a while, and no longer (transaction.py).
        transaction.feed(CancelSent())
        while isinstance(report := await told.get(), Deliver):
            response = report.message
            if response.status < 200:
                continue
            if response.status < 300:
                self._confirm(response)
                await self.send_ack(response)
                await self.send_bye()
            break
        return Outcome(kind=kind)

    def _confirm(self, response: Message) -> None:
        """The dialog, from the 2xx that set it up (§12.1.2): the callee's tag, its Contact as
        the remote target, and the Record-Route in reverse order as the route set."""
        self.confirmed = True
        self.remote_header = response.get("To") or self.remote_header
        if target := contact_uri(response.get("Contact")):
            self.remote_target = target
        self.route_set = list(reversed(response.get_all("Record-Route")))

    async def _answered(self, response: Message) -> Outcome:
        self._confirm(response)
        await self.send_ack(response)
        answered_at = time.monotonic()
        try:
            media = sdp.parse_answer(response.body)
        except sdp.SdpError as exc:
            await self.send_bye()
            return Outcome(kind="error", phrase=f"unusable SDP answer: {exc}")
        if self.crypto is not None and media.crypto is not None:
            self.stream.secure(local_key=self.crypto.key, remote_key=media.crypto.key)
        elif self.ua.config.srtp == "required":
            # SIP_SRTP=required: an answer without SRTP is never spoken to.
            await self.send_bye()
            return Outcome(kind="error", phrase="the callee answered without SRTP")
        stream = self.stream
        self.follow(media)  # the answer's direction too: a callee may answer on hold
        # The message starts as the call is answered, not after on_answered's report (a
        # database write, which waits its turn when many calls answer at once): the callee
        # hears it at once, and the call lasts what the message lasts. on_answered may still
        # shorten max_seconds (a quota's grant), counted from the answer.
        if self.talk is not None:
            player = asyncio.ensure_future(self.talk(self))
        else:
            player = asyncio.ensure_future(stream.play(self.audio.get(media.payload_type, b"")))
        remote = asyncio.ensure_future(self.remote_hangup.wait())
        local = asyncio.ensure_future(self.hangup_requested.wait())
        # The reports (ringing's, if still under way, then the answer's) are written while
        # the call goes on, so neither stretches it; the outcome waits for both.
        reports = asyncio.ensure_future(self._report_answer())
        ending = {player, remote, local}
        try:
            while True:
                finished, _ = await asyncio.wait(
                    ending if reports.done() else {*ending, reports},
                    timeout=max(0.0, self.max_seconds - (time.monotonic() - answered_at)),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                done = finished - {reports}
                if done or reports not in finished:
                    break
                # Reported: max_seconds may be shorter now (a quota's grant).
                reports.result()
        finally:
            for task in (player, remote, local):
                task.cancel()
            # A talk may finish what it holds as it stops (a script's recording is saved):
            # the call's end waits for that, a moment at most.
            await asyncio.wait({player}, timeout=TALK_STOP_SECONDS)
        by_remote = remote in done
        hung_up_by = "remote" if by_remote else "local" if done else "limit"
        duration = time.monotonic() - answered_at
        if not by_remote:
            await self.send_bye()
        await reports
        return Outcome(
            kind="answered",
            code=response.status,
            duration=duration,
            hung_up_by=hung_up_by,
            received=stream.received,
            sent_packets=stream.sent_packets,
        )

    async def _report_answer(self) -> None:
        """on_answered, after the ringing report: the caller's reports arrive in order."""
        await self._ringing_reported()
        await self.on_answered()

    async def _ringing_reported(self) -> None:
        """Once the ringing report (if any) is written: nothing that follows it (the answer's
        report, the outcome) overtakes it."""
        if self.ringing_report is not None:
            await self.ringing_report
