"""Relay's SIP user agent: places a call through the trunk, plays its audio, hangs up.

The parts of RFC 3261 a trunk-facing caller needs, on asyncio: INVITE and non-INVITE client
transactions (with UDP retransmission timers A/E and timeouts B/F), CANCEL, ACK for 2xx and
non-2xx, BYE in both directions, digest authentication (401/407), and SDP offer/answer for
G.711. It knows nothing of Django: the telephony agent (telephony/agent.py) maps what it
reports to the call pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telephony.sip import auth, sdp
from telephony.sip.message import (
    Message,
    host_port_of,
    new_branch,
    new_call_id,
    new_tag,
    params,
    response_to,
    uri_of,
)
from telephony.sip.rtp import ReceivedAudio, RtpStream
from telephony.sip.transport import TcpTransport, UdpTransport
from telephony.sip.uas import InboundCall

logger = logging.getLogger(__name__)

ALLOW = "INVITE, ACK, CANCEL, BYE, OPTIONS"


@dataclass(frozen=True)
class UaConfig:
    trunk_uri: str  # sip:host[:port]
    bind_host: str = "127.0.0.1"
    bind_port: int = 5060
    transport: str = "udp"
    public_host: str = ""  # what Contact, Via and SDP advertise (behind NAT); default bind
    username: str = ""
    password: str = ""
    rtp_ports: tuple[int, int] = (20000, 20999)
    t1: float = 0.5
    user_agent: str = "Relay"


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
    hung_up_by: str = ""  # "local" or "remote", for answered calls
    received: ReceivedAudio = field(default_factory=ReceivedAudio)
    sent_packets: int = 0


class UserAgent:
    def __init__(self, config: UaConfig) -> None:
        self.config = config
        transport_class = TcpTransport if config.transport == "tcp" else UdpTransport
        self.transport = transport_class(self._on_message)
        self.local: tuple[str, int] = (config.bind_host, config.bind_port)
        self.trunk: tuple[str, int] = host_port_of(config.trunk_uri)
        self.transactions: dict[str, asyncio.Queue] = {}
        self.calls: dict[str, OutboundCall] = {}
        self.inbound: dict[str, InboundCall] = {}
        # Who takes a new INVITE (the telephony agent); without one, INVITEs get 404. An
        # INVITE from a source `accepts_source` refuses gets 403 and no state at all.
        self.on_invite: Callable[[InboundCall], Awaitable[None]] | None = None
        self.accepts_source: Callable[[str], bool] = lambda host: True
        self.allow = ALLOW
        first, last = config.rtp_ports
        self.free_rtp_ports = deque(range(first + first % 2, last, 2))

    @property
    def host(self) -> str:
        return self.config.public_host or self.local[0]

    async def start(self) -> None:
        self.local = await self.transport.start(self.config.bind_host, self.config.bind_port)
        loop = asyncio.get_running_loop()
        host, port = self.trunk
        infos = await loop.getaddrinfo(host, port, type=2)  # SOCK_DGRAM: one address per host
        self.trunk = infos[0][4][:2]

    async def close(self) -> None:
        await self.transport.close()

    # --- messages in ---------------------------------------------------------------------------
    def _on_message(self, message: Message, source: tuple[str, int]) -> None:
        if not message.is_request:
            number, method = message.cseq
            queue = self.transactions.get(f"{message.branch}:{method}")
            if queue is not None:
                queue.put_nowait(message)
            elif method == "INVITE" and 200 <= message.status < 300:
                call = self.calls.get(message.call_id)
                if call is not None:  # a 2xx retransmitted after its transaction: ACK again
                    asyncio.ensure_future(call.send_ack(message))
            return
        asyncio.ensure_future(self._on_request(message, source))

    async def _on_request(self, request: Message, source: tuple[str, int]) -> None:
        method = request.method
        inbound = self.inbound.get(request.call_id)
        if inbound is not None:
            await inbound.on_request(request, source)
            return
        if method == "INVITE" and self.on_invite is not None and request.call_id not in self.calls:
            if "tag=" in (request.get("To") or ""):  # a dialog this agent does not hold
                await self.respond(request, 481, "Call/Transaction Does Not Exist", source)
                return
            if not self.accepts_source(source[0]):
                logger.warning("INVITE refused: %s is not an allowed source", source[0])
                await self.respond(request, 403, "Forbidden", source)
                return
            inbound = self.inbound[request.call_id] = InboundCall(self, request, source)
            await inbound.trying()
            await self.on_invite(inbound)
            return
        if method == "ACK":
            return
        call = self.calls.get(request.call_id)
        if method == "BYE":
            if call is None:
                await self.respond(request, 481, "Call/Transaction Does Not Exist", source)
                return
            await self.respond(request, 200, "OK", source)
            call.remote_hangup.set()
        elif method == "OPTIONS":
            response = response_to(request, 200, "OK", to_tag=new_tag())
            response.set("Allow", ALLOW)
            await self.transport.send(response, source)
        elif method == "INVITE" and call is not None:
            # A re-INVITE (a session refresh): keep the media as it is.
            response = response_to(request, 200, "OK")
            response.set("Contact", self.contact())
            response.set("Content-Type", "application/sdp")
            response.body = call.local_sdp
            await self.transport.send(response, source)
        elif method == "INVITE":
            await self.respond(request, 404, "Not Found", source)
        elif method == "CANCEL":
            await self.respond(request, 481, "Call/Transaction Does Not Exist", source)
        else:
            response = response_to(request, 405, "Method Not Allowed", to_tag=new_tag())
            response.set("Allow", ALLOW)
            await self.transport.send(response, source)

    async def respond(self, request: Message, status: int, reason: str, destination) -> None:
        await self.transport.send(response_to(request, status, reason), destination)

    # --- messages out --------------------------------------------------------------------------
    def via(self, branch: str) -> str:
        return f"SIP/2.0/{self.transport.name} {self.host}:{self.local[1]};branch={branch};rport"

    def contact(self) -> str:
        suffix = ";transport=tcp" if self.config.transport == "tcp" else ""
        return f"<sip:relay@{self.host}:{self.local[1]}{suffix}>"

    async def send(self, message: Message, destination: tuple[str, int] | None = None) -> None:
        await self.transport.send(message, destination or self.trunk)

    def open_transaction(self, branch: str, method: str) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        self.transactions[f"{branch}:{method}"] = queue
        return queue

    def close_transaction(self, branch: str, method: str) -> None:
        self.transactions.pop(f"{branch}:{method}", None)

    async def request(
        self, message: Message, destination: tuple[str, int] | None = None
    ) -> Message | None:
        """A non-INVITE client transaction (BYE, CANCEL) to the trunk, or to `destination`:
        the final response, or None after timer F (64*T1). Over UDP the request is resent at
        T1, 2*T1... up to 4 s apart."""
        method, t1 = message.method, self.config.t1
        queue = self.open_transaction(message.branch, method)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 64 * t1
        interval = t1
        try:
            await self.send(message, destination)
            while (remaining := deadline - loop.time()) > 0:
                wait = remaining if self.transport.reliable else min(interval, remaining)
                try:
                    response = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    if not self.transport.reliable:
                        await self.send(message, destination)
                        interval = min(interval * 2, 4.0)
                    continue
                if response.status >= 200:
                    return response
                interval = 4.0  # a provisional: keep resending, at T2
            return None
        finally:
            self.close_transaction(message.branch, method)

    def rtp_port(self) -> int:
        if not self.free_rtp_ports:
            raise OSError("no free RTP port in RTP_PORT_RANGE")
        return self.free_rtp_ports.popleft()

    def release_rtp_port(self, port: int) -> None:
        self.free_rtp_ports.append(port)

    async def open_rtp(self, stream: RtpStream) -> int:
        """Bind `stream` to a free port of the range; a port something else holds goes to
        the back of the queue."""
        for _attempt in range(20):
            port = self.rtp_port()
            try:
                await stream.open(self.config.bind_host, port)
            except OSError:
                self.release_rtp_port(port)
                continue
            return port
        raise OSError("no port of RTP_PORT_RANGE could be bound")

    def place(self, **kwargs) -> OutboundCall:
        return OutboundCall(self, **kwargs)

    async def register(self, *, expires: int) -> int:
        """REGISTER this agent's Contact with the trunk as SIP_USERNAME (answering one 401/407
        challenge); the expiry the registrar granted, in seconds. RegistrationError otherwise."""
        config = self.config
        host, port = host_port_of(config.trunk_uri)
        domain = host if port == 5060 else f"{host}:{port}"
        registrar, aor = f"sip:{domain}", f"<sip:{config.username}@{domain}>"
        call_id, tag, cseq = new_call_id(self.host), new_tag(), 1
        authorization = None
        for _attempt in range(2):
            request = Message(method="REGISTER", uri=registrar)
            request.headers = [
                ("Via", self.via(new_branch())),
                ("Max-Forwards", "70"),
                ("From", f"{aor};tag={tag}"),
                ("To", aor),
                ("Call-ID", call_id),
                ("CSeq", f"{cseq} REGISTER"),
                ("Contact", self.contact()),
                ("Expires", str(expires)),
                ("User-Agent", config.user_agent),
            ]
            if authorization:
                request.set(*authorization)
            response = await self.request(request)
            if response is None:
                raise RegistrationError("no response from the registrar")
            if 200 <= response.status < 300:
                granted = response.get("Expires")
                return int(granted) if granted and granted.isdigit() else expires
            if response.status in (401, 407) and authorization is None and config.username:
                challenge = response.get(
                    "WWW-Authenticate" if response.status == 401 else "Proxy-Authenticate"
                )
                value = auth.authorization(
                    challenge=challenge or "",
                    method="REGISTER",
                    uri=registrar,
                    username=config.username,
                    password=config.password,
                )
                if value is not None:
                    header = "Authorization" if response.status == 401 else "Proxy-Authorization"
                    authorization, cseq = (header, value), cseq + 1
                    continue
            raise RegistrationError(f"{response.status} {response.reason}")
        raise RegistrationError("the registrar refused the credentials")


class RegistrationError(RuntimeError):
    pass


class OutboundCall:
    """One outbound call. `run()` dials, reports ringing and answer through the callbacks,
    plays `audio` (G.711 by payload type) once, hangs up, and returns the Outcome.
    `hang_up()` ends it from outside: CANCEL while it rings, BYE once answered."""

    def __init__(
        self,
        ua: UserAgent,
        *,
        call_id: str = "",
        to: str,
        caller: str,
        audio: dict[int, bytes],
        ring_timeout: float,
        max_seconds: float,
        on_ringing: Callable[[], Awaitable[None]],
        on_answered: Callable[[], Awaitable[None]],
    ) -> None:
        self.ua, self.audio = ua, audio
        self.ring_timeout, self.max_seconds = ring_timeout, max_seconds
        self.on_ringing, self.on_answered = on_ringing, on_answered
        self.call_id = call_id or new_call_id(ua.host)
        self.local_tag = new_tag()
        self.cseq = 1
        trunk_host = host_port_of(ua.config.trunk_uri)
        host = trunk_host[0] if trunk_host[1] == 5060 else f"{trunk_host[0]}:{trunk_host[1]}"
        self.request_uri = f"sip:{to}@{host}"
        self.from_header = f"<sip:{caller}@{host}>;tag={self.local_tag}"
        self.to_header = f"<sip:{to}@{host}>"
        self.remote_hangup = asyncio.Event()
        self.hangup_requested = asyncio.Event()
        self.cancel_pending = False
        self.remote_tag = ""
        self.remote_target = self.request_uri
        self.route: list[str] = []
        self.local_sdp = b""
        self.stream: RtpStream | None = None
        self.rtp_port = 0

    def hang_up(self) -> None:
        self.hangup_requested.set()

    # --- building requests ----------------------------------------------------------------------
    def _request(self, method: str, *, branch: str, cseq: int, uri: str, to: str) -> Message:
        message = Message(method=method, uri=uri)
        message.headers = [
            ("Via", self.ua.via(branch)),
            ("Max-Forwards", "70"),
            ("From", self.from_header),
            ("To", to),
            ("Call-ID", self.call_id),
            ("CSeq", f"{cseq} {method}"),
            *(("Route", route) for route in self.route),
            ("User-Agent", self.ua.config.user_agent),
        ]
        return message

    def _invite(self, branch: str, authorization: tuple[str, str] | None) -> Message:
        invite = self._request(
            "INVITE", branch=branch, cseq=self.cseq, uri=self.request_uri, to=self.to_header
        )
        invite.set("Contact", self.ua.contact())
        invite.set("Allow", ALLOW)
        invite.set("Content-Type", "application/sdp")
        if authorization:
            invite.set(*authorization)
        invite.body = self.local_sdp
        return invite

    def _dialog_to(self) -> str:
        return f"{self.to_header};tag={self.remote_tag}" if self.remote_tag else self.to_header

    async def send_ack(self, response: Message) -> None:
        """ACK a 2xx: a request of its own, to the remote target."""
        ack = self._request(
            "ACK",
            branch=new_branch(),
            cseq=response.cseq[0],
            uri=self.remote_target,
            to=response.get("To") or self._dialog_to(),
        )
        await self.ua.send(ack)

    async def _ack_failure(self, invite: Message, response: Message) -> None:
        """ACK a non-2xx final response: part of the INVITE transaction (same branch)."""
        ack = self._request(
            "ACK",
            branch=invite.branch,
            cseq=invite.cseq[0],
            uri=invite.uri,
            to=response.get("To") or self.to_header,
        )
        await self.ua.send(ack)

    # --- the call -----------------------------------------------------------------------------
    async def run(self) -> Outcome:
        self.ua.calls[self.call_id] = self
        try:
            self.stream = RtpStream(payload_type=0)
            self.rtp_port = await self.ua.open_rtp(self.stream)
            self.local_sdp = sdp.offer(address=self.ua.host, port=self.rtp_port)
            return await self._dial()
        except OSError as exc:
            logger.warning("call %s: %s", self.call_id, exc)
            return Outcome(kind="error", phrase=str(exc)[:120])
        finally:
            if self.stream is not None:
                self.stream.close()
            if self.rtp_port:
                self.ua.release_rtp_port(self.rtp_port)
            # Late retransmissions of a 2xx are still ACKed for a little while.
            asyncio.get_running_loop().call_later(
                32 * self.ua.config.t1, self.ua.calls.pop, self.call_id, None
            )

    async def _dial(self) -> Outcome:
        loop = asyncio.get_running_loop()
        started = loop.time()
        ring_deadline = started + self.ring_timeout
        authorized = False
        authorization = None
        while True:
            branch = new_branch()
            invite = self._invite(branch, authorization)
            queue = self.ua.open_transaction(branch, "INVITE")
            try:
                outcome = await self._invite_transaction(invite, queue, started, ring_deadline)
            finally:
                self.ua.close_transaction(branch, "INVITE")
            if isinstance(outcome, Outcome):
                return outcome
            # A 401/407 challenge: answer it once, with the next CSeq.
            challenge_header = "WWW-Authenticate" if outcome.status == 401 else "Proxy-Authenticate"
            config = self.ua.config
            value = None
            if config.username and not authorized:
                value = auth.authorization(
                    challenge=outcome.get(challenge_header) or "",
                    method="INVITE",
                    uri=self.request_uri,
                    username=config.username,
                    password=config.password,
                )
            if value is None:
                return Outcome(kind="rejected", code=outcome.status, phrase=outcome.reason)
            authorized = True
            header = "Authorization" if outcome.status == 401 else "Proxy-Authorization"
            authorization = (header, value)
            self.cseq += 1

    async def _invite_transaction(self, invite, queue, started, ring_deadline):
        """Run one INVITE transaction to its end: an Outcome, or the 401/407 response to
        answer with credentials."""
        loop = asyncio.get_running_loop()
        t1 = self.ua.config.t1
        # Without any response, give up at timer B (64*T1) or the ring timeout, if sooner.
        no_response_deadline = min(started + 64 * t1, ring_deadline)
        await self.ua.send(invite)
        interval, resend_at = t1, loop.time() + t1
        proceeding = ringing = False
        hangup = asyncio.ensure_future(self.hangup_requested.wait())
        try:
            while True:
                now = loop.time()
                deadline = ring_deadline if proceeding else no_response_deadline
                if now >= deadline:
                    if not proceeding:
                        return Outcome(kind="timeout", code=408, phrase="Request Timeout")
                    return await self._cancel(invite, queue, kind="no_answer")
                wait = deadline - now
                if not proceeding and not self.ua.transport.reliable:
                    wait = min(wait, max(0.0, resend_at - now))
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {getter, hangup}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                if getter not in done:
                    getter.cancel()
                if hangup in done and getter not in done:
                    if proceeding:
                        return await self._cancel(invite, queue, kind="canceled")
                    # No provisional response yet: a CANCEL may not be sent (RFC 3261
                    # §9.1); wait for one, or for the transaction to time out.
                    hangup = asyncio.ensure_future(asyncio.Event().wait())
                    self.cancel_pending = True
                    continue
                if getter not in done:
                    if (
                        not proceeding
                        and not self.ua.transport.reliable
                        and loop.time() >= resend_at
                    ):
                        await self.ua.send(invite)
                        interval = min(interval * 2, 4.0)
                        resend_at = loop.time() + interval
                    continue
                response = getter.result()
                if response.status < 200:
                    proceeding = True
                    if response.status in (180, 183) and not ringing:
                        ringing = True
                        await self.on_ringing()
                    if self.cancel_pending:
                        return await self._cancel(invite, queue, kind="canceled")
                    continue
                if response.status < 300:
                    return await self._answered(response, queue)
                await self._ack_failure(invite, response)
                if response.status in (401, 407):
                    return response
                return Outcome(kind="rejected", code=response.status, phrase=response.reason)
        finally:
            hangup.cancel()

    async def _cancel(self, invite: Message, queue: asyncio.Queue, *, kind: str) -> Outcome:
        """CANCEL a ringing INVITE and see its transaction out (487, ACKed). If the callee
        answered in the meantime, the call is ACKed and hung up at once with BYE."""
        cancel = self._request(
            "CANCEL", branch=invite.branch, cseq=invite.cseq[0], uri=invite.uri, to=self.to_header
        )
        await self.ua.request(cancel)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 64 * self.ua.config.t1
        while (remaining := deadline - loop.time()) > 0:
            try:
                response = await asyncio.wait_for(queue.get(), remaining)
            except TimeoutError:
                break
            if response.status < 200:
                continue
            if response.status < 300:
                self._dialog_from(response)
                await self.send_ack(response)
                await self._bye()
            else:
                await self._ack_failure(invite, response)
            break
        return Outcome(kind=kind)

    def _dialog_from(self, response: Message) -> None:
        self.remote_tag = params(response.get("To") or "").get("tag", "")
        contact = response.get("Contact")
        if contact:
            self.remote_target = uri_of(contact)
        self.route = list(reversed(response.get_all("Record-Route")))

    async def _bye(self) -> None:
        self.cseq += 1
        bye = self._request(
            "BYE",
            branch=new_branch(),
            cseq=self.cseq,
            uri=self.remote_target,
            to=self._dialog_to(),
        )
        response = await self.ua.request(bye)
        if response is None:
            logger.warning("call %s: BYE got no answer", self.call_id)

    async def _answered(self, response: Message, queue: asyncio.Queue) -> Outcome:
        self._dialog_from(response)
        await self.send_ack(response)
        answered_at = time.monotonic()
        try:
            media = sdp.parse_answer(response.body)
        except sdp.SdpError as exc:
            await self._bye()
            return Outcome(kind="error", phrase=f"unusable SDP answer: {exc}")
        await self.on_answered()
        stream = self.stream
        stream.payload_type = media.payload_type
        stream.remote = (media.host, media.port)
        audio = self.audio.get(media.payload_type, b"")
        player = asyncio.ensure_future(stream.play(audio))
        remote = asyncio.ensure_future(self.remote_hangup.wait())
        local = asyncio.ensure_future(self.hangup_requested.wait())
        acks = asyncio.ensure_future(self._ack_retransmissions(queue))
        try:
            done, _ = await asyncio.wait(
                {player, remote, local},
                timeout=self.max_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for task in (player, remote, local):
                task.cancel()
        by_remote = remote in done
        duration = time.monotonic() - answered_at
        if not by_remote:
            await self._bye()
        acks.cancel()
        return Outcome(
            kind="answered",
            code=response.status,
            duration=duration,
            hung_up_by="remote" if by_remote else "local",
            received=stream.received,
            sent_packets=stream.sent_packets,
        )

    async def _ack_retransmissions(self, queue: asyncio.Queue) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                response = await queue.get()
                if 200 <= response.status < 300:
                    await self.send_ack(response)
