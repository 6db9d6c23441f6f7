"""Relay's SIP user agent: one transport, the transactions on it, and the dialogs of the calls
it carries, in both directions.

The parts of RFC 3261 a trunk-facing user agent needs, on asyncio: the loop that drives every
transaction (`TransactionDriver` runs the state machines of transaction.py, and matches
messages to them), the non-INVITE transactions it sends and answers, digest authentication
(401/407) for INVITE and REGISTER, the dispatch of every request to its dialog
(`uac.OutboundCall` for calls Relay places, `uas.InboundDialog` for calls it takes), and the
answers to requests outside any dialog. It knows nothing of Django: the telephony agent
(telephony/agent.py) maps what it reports to the call pipeline.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field

from telephony.sip import auth, checks
from telephony.sip.dialog import ALLOW, Dialog, options_answer
from telephony.sip.dns import Target, TargetRefused, TrunkNotFound, TrunkResolver, allowed_targets
from telephony.sip.message import (
    Message,
    host_port_of,
    new_branch,
    new_sip_call_id,
    new_tag,
    params,
    response_to,
)
from telephony.sip.rtp import RtpStream
from telephony.sip.transaction import (
    Action,
    Deliver,
    Event,
    Failed,
    FromTu,
    NonInviteClient,
    NonInviteServer,
    Received,
    StartTimer,
    StopTimer,
    Terminated,
    Timer,
    TimerFired,
    Timers,
    Transaction,
    Transmit,
    TransportFailed,
    client_key,
    linger,
    server_key,
)
from telephony.sip.transport import TcpTransport, TlsTransport, UdpTransport, tls_contexts
from telephony.sip.uac import OutboundCall, Outcome
from telephony.sip.uas import InboundDialog

__all__ = ["Outcome", "OutboundCall", "RegistrationError", "UaConfig", "UserAgent"]

logger = logging.getLogger(__name__)

DRAIN_RETRY_AFTER = 30  # seconds, in a draining agent's 503 (RFC 3261 §20.33)


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
    timers: Timers = field(default_factory=Timers)  # for the transactions (transaction.py)
    user_agent: str = "Relay"
    media_latching: bool = True  # symmetric RTP (rtp.RtpStream.expect)
    tls_ca_file: str = ""  # with transport "tls": the CAs the peer is verified against
    tls_cert_file: str = ""  # ours, for inbound calls over TLS and mutual TLS
    tls_key_file: str = ""
    srtp: str = "off"  # off, optional or required (SDES keys; only over TLS)
    dns_servers: tuple[tuple[str, int], ...] = ()  # (ip, port); none: the system's resolvers
    rtc_ports: range | None = None  # the browsers' legs (telephony.webrtc); None: the kernel's
    # Whether a SIP URI dialled directly (a user's word: a ring list's sip: entry, a transfer's
    # target) may lead to private or loopback addresses (WEBHOOK_ALLOW_PRIVATE); the trunk may.
    allow_private_targets: bool = False


class UserAgent:
    def __init__(self, config: UaConfig) -> None:
        self.config = config
        secure = config.transport == "tls"
        self.scheme = "sips" if config.trunk_uri.lower().startswith("sips:") else "sip"
        self.default_port = 5061 if secure else 5060  # RFC 3261 §19.1.2
        # The trunk's first target (found by DNS at start: dns.py); its name is what a TLS
        # certificate must show (RFC 5922 §4: the URI's host, not what DNS turned it into).
        self.trunk: tuple[str, int] = host_port_of(config.trunk_uri, self.default_port)
        self.trunk_name = self.trunk[0]
        self.resolver = TrunkResolver(list(config.dns_servers) or None)
        self.known_targets: list[Target] = []
        # The names peers were found by, for checking their TLS certificates (RFC 5922).
        self.peer_names: dict[tuple[str, int], str] = {}
        if secure:
            client, server = tls_contexts(
                ca_file=config.tls_ca_file,
                cert_file=config.tls_cert_file,
                key_file=config.tls_key_file,
            )
            self.transport = TlsTransport(
                self._on_message, client=client, server=server, names=self.peer_names
            )
        elif config.transport == "tcp":
            self.transport = TcpTransport(self._on_message)
        else:
            self.transport = UdpTransport(self._on_message)
        self.local: tuple[str, int] = (config.bind_host, config.bind_port)
        # The transactions under way, by what matches a message to them (§17.1.3, §17.2.3).
        self.client_transactions: dict[str, TransactionDriver] = {}
        self.server_transactions: dict[str, TransactionDriver] = {}
        # Every call's dialog by SIP Call-ID, both directions (kept a while after its end, to
        # absorb retransmissions: transaction.linger).
        self.dialogs_by_sip_call_id: dict[str, Dialog] = {}
        # Who takes a new INVITE (the telephony agent); without one, INVITEs get 404. An
        # INVITE from a source `accepts_source` refuses gets 403 and no state at all.
        self.on_invite: Callable[[InboundDialog], Awaitable[None]] | None = None
        # Draining (the agent's drain()): a new INVITE and an OPTIONS probe get 503 with
        # Retry-After, so that an edge's dispatcher sends calls elsewhere; calls in
        # progress go on.
        self.draining = False
        self.accepts_source: Callable[[str], bool] = lambda host: True
        self.tasks: set[asyncio.Task] = set()
        first, last = config.rtp_ports
        self.free_rtp_ports = deque(range(first + first % 2, last, 2))

    @property
    def host(self) -> str:
        return self.config.public_host or self.local[0]

    async def start(self) -> None:
        self.local = await self.transport.start(self.config.bind_host, self.config.bind_port)
        targets = await self.trunk_targets()
        self.trunk = (targets[0].address, targets[0].port)
        logger.info("trunk targets, in order: %s", ", ".join(t.described() for t in targets))

    async def uri_targets(self, uri: str) -> list[Target]:
        """Where to send an INVITE for a SIP URI dialled directly (a ring list's sip: entry, a
        transfer's target: a user's word): its host's targets (RFC 3263, dns.py) over this
        agent's transport and address family, those at a private or local address left out
        unless `allow_private_targets` (dns.allowed_targets). The addresses returned are the
        ones checked: the call sends to them, never to the name again. TrunkNotFound (an
        OSError) when there is none; TargetRefused (one too) when every one was left out."""
        found = await self.resolver.resolve(uri, transport=self.config.transport)
        reachable = self._reachable(found)
        if not reachable:
            raise TrunkNotFound(f"{uri} has no target over {self.config.transport}")
        targets, refused = allowed_targets(
            reachable, allow_private=self.config.allow_private_targets
        )
        if refused:
            logger.info(
                "%s: not tried, a private or local address: %s",
                uri,
                ", ".join(target.described() for target in refused),
            )
        if not targets:
            raise TargetRefused(
                f"{uri} not dialled: its host now resolves to a private or local address "
                f"only ({', '.join(sorted({target.address for target in refused}))}), which "
                "WEBHOOK_ALLOW_PRIVATE does not allow"
            )
        host = host_port_of(uri, self.default_port)[0]
        for target in targets:
            self.peer_names[(target.address, target.port)] = host  # its TLS name
        return targets

    async def uri_problem(self, uri: str) -> str | None:
        """Why a SIP URI a user named may not be dialled now, as `uri_targets` resolves it
        (every address it would try at a private or local address), or None: a host that
        does not resolve is no problem here (its dial fails on its own). For a refusal in
        words (a transfer's 403) before any leg exists; the dial resolves and checks again."""
        try:
            await self.uri_targets(uri)
        except TargetRefused:
            return f"{host_port_of(uri)[0]} resolves to a private or local address"
        except (OSError, ValueError):
            return None
        return None

    def _reachable(self, found: list[Target]) -> list[Target]:
        """The targets of `found` this agent can send to: over its transport, and (a UDP
        socket sends to addresses of its own family only) in its address family."""
        ipv6 = ":" in self.local[0]
        return [
            target
            for target in found
            if target.transport == self.config.transport
            and (self.transport.reliable or (":" in target.address) == ipv6)
        ]

    async def trunk_targets(self) -> list[Target]:
        """Where to send a new INVITE, in the order to try (RFC 3263, dns.py): the targets
        over this agent's transport and address family. Resolved afresh each time, from
        dnspython's cache while the records' TTLs last; if DNS fails, the last targets it
        gave. TrunkNotFound (an OSError) when there is none at all."""
        try:
            found = await self.resolver.resolve(
                self.config.trunk_uri, transport=self.config.transport
            )
        except TrunkNotFound as exc:
            if not self.known_targets:
                raise
            logger.warning("%s; trying the trunk's last known targets", exc)
            return self.known_targets
        targets = self._reachable(found)
        if not targets:
            raise TrunkNotFound(
                f"the trunk has no target over {self.config.transport} "
                f"(found: {', '.join(map(str, found))})"
            )
        for target in targets:
            self.peer_names[(target.address, target.port)] = self.trunk_name
        self.known_targets = targets
        return targets

    def trunk_addresses(self) -> set[str]:
        """Every address the trunk was last found at (inbound calls come from any)."""
        return {target.address for target in self.known_targets} | {self.trunk[0]}

    async def close(self) -> None:
        for table in (self.client_transactions, self.server_transactions):
            for transaction in list(table.values()):
                transaction.close()
        for task in list(self.tasks):
            task.cancel()
        await self.transport.close()

    def background(self, work: Coroutine) -> None:
        """Run `work` (a message a transaction transmits, say) until it ends or the agent
        closes."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def forget_later(self, sip_call_id: str) -> None:
        """Drop a dialog once late retransmissions of its messages can no longer come."""
        dialog = self.dialogs_by_sip_call_id.get(sip_call_id)

        def forget() -> None:
            if self.dialogs_by_sip_call_id.get(sip_call_id) is dialog:
                del self.dialogs_by_sip_call_id[sip_call_id]

        asyncio.get_running_loop().call_later(linger(self.config.timers), forget)

    # --- messages in ---------------------------------------------------------------------------
    def _on_message(self, message: Message, source: tuple[str, int]) -> None:
        if not message.is_request:
            if not checks.response_acceptable(message):
                logger.debug("dropped a malformed response from %s", source[0])
                return
            transaction = self.client_transactions.get(client_key(message))
            if transaction is not None:
                transaction.feed(Received(message))
            elif (dialog := self.dialogs_by_sip_call_id.get(message.sip_call_id)) is not None:
                dialog.on_response(message)
            return
        mark_received(message, source)
        asyncio.ensure_future(self._on_request(message, source))

    async def _on_request(self, request: Message, source: tuple[str, int]) -> None:
        # RFC 3261 §8.2: what a request earns before anything reads it (checks.py).
        if (refusal := checks.check_request(request, allow=ALLOW)) is not None:
            logger.debug("refused %s from %s: %s", request.method, source[0], refusal)
            if refusal.status:
                await self.transport.send(checks.refusal_response(request, refusal), source)
            return
        key = server_key(request)
        if key is not None and (transaction := self.server_transactions.get(key)) is not None:
            # A request resent, or the ACK of a refusal: its transaction's (§17.2.3).
            transaction.feed(Received(request))
            return
        if request.method not in ("INVITE", "ACK"):
            # §17.2.2: answered through a transaction of its own, which answers it again
            # when it comes again. (An INVITE's is the InboundDialog's; an ACK has none.)
            self.server_transaction(NonInviteServer, request, source, tell=_told_nothing)
        dialog = self.dialogs_by_sip_call_id.get(request.sip_call_id)
        if dialog is not None:
            await dialog.on_request(request, source)
            return
        method = request.method
        if method == "ACK":
            return  # §17.2.3: an ACK matching nothing is absorbed
        if "tag" in params(request.get("To") or ""):
            # §12.2.2: a request inside a dialog this agent does not hold.
            await self.respond(request, 481, "Call/Transaction Does Not Exist", source)
        elif method in ("INVITE", "OPTIONS") and self.draining:
            response = response_to(request, 503, "Service Unavailable")
            response.set("Retry-After", str(DRAIN_RETRY_AFTER))
            await self.reply(request, response, source)
        elif method == "INVITE" and self.on_invite is not None:
            if not self.accepts_source(source[0]):
                logger.warning("INVITE refused: %s is not an allowed source", source[0])
                await self.respond(request, 403, "Forbidden", source)
                return
            dialog = self.dialogs_by_sip_call_id[request.sip_call_id] = InboundDialog(
                self, request, source
            )
            dialog.trying()
            await self.on_invite(dialog)
        elif method == "INVITE":
            await self.respond(request, 404, "Not Found", source)
        elif method == "OPTIONS":
            await self.reply(request, options_answer(request), source)
        elif method in ("BYE", "CANCEL", "INFO"):
            await self.respond(request, 481, "Call/Transaction Does Not Exist", source)
        elif method == "REFER":
            # RFC 3515 outside any dialog: a transfer of no call Relay holds.
            await self.respond(request, 403, "Forbidden (REFER outside a call)", source)
        # Any other method was answered 405 or 501 by checks.check_request above.

    async def respond(self, request: Message, status: int, reason: str, destination) -> None:
        await self.reply(request, response_to(request, status, reason), destination)

    async def reply(self, request: Message, response: Message, destination) -> None:
        """Send `response` to `request` through the request's server transaction, which
        sends it again whenever the request comes again; without one (an INVITE turned
        away before any dialog, a re-INVITE), statelessly to `destination`."""
        key = server_key(request)
        transaction = self.server_transactions.get(key) if key is not None else None
        if transaction is None:
            await self.transport.send(response, destination)
        else:
            transaction.feed(FromTu(response))

    # --- messages out --------------------------------------------------------------------------
    def via(self, branch: str) -> str:
        return f"SIP/2.0/{self.transport.name} {self.host}:{self.local[1]};branch={branch};rport"

    def contact(self) -> str:
        transport = self.config.transport
        suffix = f";transport={transport}" if transport == "tcp" else ""
        if transport == "tls" and self.scheme == "sip":
            suffix = ";transport=tls"
        return f"<{self.scheme}:relay@{self.host}:{self.local[1]}{suffix}>"

    async def send(self, message: Message, destination: tuple[str, int] | None = None) -> None:
        await self.transport.send(message, destination or self.trunk)

    def client_transaction(
        self,
        kind: type[Transaction],
        request: Message,
        destination: tuple[str, int] | None,
        *,
        tell: Callable[[Action], None],
    ) -> TransactionDriver:
        """Send `request` in a new client transaction of `kind` (transaction.InviteClient
        or NonInviteClient) to `destination`, the trunk by default; what the transaction
        tells its TU goes to `tell`."""
        machine = kind(request, self.config.timers, reliable=self.transport.reliable)
        driver = TransactionDriver(
            self, machine, destination or self.trunk, self.client_transactions, tell
        )
        driver.start(client_key(request))
        return driver

    def server_transaction(
        self,
        kind: type[Transaction],
        request: Message,
        source: tuple[str, int],
        *,
        tell: Callable[[Action], None],
    ) -> TransactionDriver:
        """A server transaction of `kind` (transaction.InviteServer or NonInviteServer) for
        `request`, which came from `source`; its responses go back there."""
        machine = kind(request, self.config.timers, reliable=self.transport.reliable)
        driver = TransactionDriver(self, machine, source, self.server_transactions, tell)
        driver.start(server_key(request))
        return driver

    def credentials(self, challenge: Message, method: str, uri: str) -> tuple[str, str] | None:
        """The (Proxy-)Authorization header answering a 401 or 407 `challenge` to a `method`
        request for `uri`, as SIP_USERNAME; None when there are no credentials or the
        challenge is not one this agent can answer."""
        if not self.config.username or challenge.status not in (401, 407):
            return None
        www = challenge.status == 401
        value = auth.authorization(
            challenge=challenge.get("WWW-Authenticate" if www else "Proxy-Authenticate") or "",
            method=method,
            uri=uri,
            username=self.config.username,
            password=self.config.password,
        )
        if value is None:
            return None
        return ("Authorization" if www else "Proxy-Authorization", value)

    async def request(
        self, message: Message, destination: tuple[str, int] | None = None
    ) -> Message | None:
        """A non-INVITE client transaction (BYE, CANCEL, REGISTER: transaction.NonInviteClient)
        to the trunk, or to `destination`: the final response, or None when none came before
        timer F or the transport failed. Over UDP the transaction resends the request (timer
        E)."""
        told: asyncio.Queue[Action] = asyncio.Queue()
        transaction = self.client_transaction(
            NonInviteClient, message, destination, tell=told.put_nowait
        )
        try:
            while True:
                report = await told.get()
                if not isinstance(report, Deliver):
                    return None  # timer F, or a transport error
                if report.message.status >= 200:
                    return report.message
        finally:
            transaction.abandon()

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

    def new_stream(self, *, payload_type: int) -> RtpStream:
        return RtpStream(payload_type=payload_type, latching=self.config.media_latching)

    def place(self, **kwargs) -> OutboundCall:
        return OutboundCall(self, **kwargs)

    async def register(self, *, expires: int) -> int:
        """REGISTER this agent's Contact with the trunk as SIP_USERNAME (answering one 401/407
        challenge); the expiry the registrar granted, in seconds. RegistrationError otherwise."""
        config = self.config
        host, port = host_port_of(config.trunk_uri, self.default_port)
        domain = host if port == self.default_port else f"{host}:{port}"
        registrar = f"{self.scheme}:{domain}"
        aor = f"<{self.scheme}:{config.username}@{domain}>"
        sip_call_id, tag, cseq = new_sip_call_id(self.host), new_tag(), 1
        authorization = None
        while True:
            request = Message(method="REGISTER", uri=registrar)
            request.headers = [
                ("Via", self.via(new_branch())),
                ("Max-Forwards", "70"),
                ("From", f"{aor};tag={tag}"),
                ("To", aor),
                ("Call-ID", sip_call_id),
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
            if authorization is None:
                authorization = self.credentials(response, "REGISTER", registrar)
                if authorization is not None:
                    cseq += 1
                    continue
            if response.status in (401, 407) and authorization is not None:
                raise RegistrationError("the registrar refused the credentials")
            raise RegistrationError(f"{response.status} {response.reason}")


class RegistrationError(RuntimeError):
    pass


class TransactionDriver:
    """One transaction of transaction.py, run on the agent's loop: what it transmits goes to
    `destination` through the transport, each timer it starts is a `call_later` handle that
    feeds it TimerFired, and what it tells its TU (Deliver, TimedOut, Failed) goes to `tell`.
    While it lives it is in `table` (the agent's client or server transactions), where
    messages are matched to it; once Terminated it is dropped from there."""

    def __init__(
        self,
        ua: UserAgent,
        machine: Transaction,
        destination: tuple[str, int],
        table: dict[str, TransactionDriver],
        tell: Callable[[Action], None],
    ) -> None:
        self.ua, self.machine, self.destination = ua, machine, destination
        self.table, self.tell = table, tell
        self.key: str | None = None
        self.handles: dict[Timer, asyncio.TimerHandle] = {}

    def start(self, key: str | None) -> None:
        """Match messages by `key` (None: match none), and take the machine's first steps."""
        self.key = key
        if key is not None:
            self.table[key] = self
        self._apply(self.machine.start())

    def feed(self, event: Event) -> None:
        self._apply(self.machine.handle(event))

    def abandon(self) -> None:
        """The TU stops waiting for a final response: a transaction still without one ends
        here; one with it goes on absorbing what the peer resends."""
        if self.machine.pending:
            self.close()

    def close(self) -> None:
        """Stop every timer and match nothing more."""
        for handle in self.handles.values():
            handle.cancel()
        self.handles.clear()
        if self.key is not None and self.table.get(self.key) is self:
            del self.table[self.key]

    def _apply(self, actions: list[Action]) -> None:
        loop = asyncio.get_running_loop()
        for action in actions:
            if isinstance(action, Transmit):
                # A task per message, in order: a TCP or TLS send may wait for its connection,
                # and the machine goes on at once.
                self.ua.background(self._transmit(action.message))
            elif isinstance(action, StartTimer):
                self._stop(action.timer)
                self.handles[action.timer] = loop.call_later(
                    action.seconds, self.feed, TimerFired(action.timer)
                )
            elif isinstance(action, StopTimer):
                self._stop(action.timer)
            elif isinstance(action, Terminated):
                self.close()
            else:
                self.tell(action)

    def _stop(self, timer: Timer) -> None:
        if (handle := self.handles.pop(timer, None)) is not None:
            handle.cancel()

    async def _transmit(self, message: Message) -> None:
        try:
            await self.ua.transport.send(message, self.destination)
        except OSError as exc:
            self.feed(TransportFailed(str(exc) or type(exc).__name__))


def _told_nothing(report: Action) -> None:
    """A non-INVITE server transaction's TU, the user agent, already has the request; the
    transaction can only report a transport failure, which leaves nothing to do."""
    if isinstance(report, Failed):
        logger.debug("a response could not be sent: %s", report.reason)


def mark_received(request: Message, source: tuple[str, int]) -> None:
    """RFC 3261 §18.2.1 and RFC 3581 §4: the top Via of a request gets `received` when its
    sent-by host is not the address the request came from, and `rport` gets the source port
    when the sender asked for it; responses copy the Via, and go back to that source."""
    vias = request.get_all("Via")
    if not vias:
        return
    top = vias[0]
    sent_by = top.split(None, 1)[1].split(";", 1)[0].strip() if " " in top.strip() else ""
    host = sent_by.rsplit(":", 1)[0] if sent_by.count(":") == 1 else sent_by
    host = host.strip("[]")
    parts = [part.strip() for part in top.split(";")]
    names = [part.split("=", 1)[0].strip().lower() for part in parts]
    changed = False
    if "rport" in names and "=" not in parts[names.index("rport")]:
        parts[names.index("rport")] = f"rport={source[1]}"
        changed = True
    if host != source[0] or "rport" in names:
        parts = [part for part in parts if not part.lower().startswith("received=")]
        parts.append(f"received={source[0]}")
        changed = True
    if not changed:
        return
    new_top = ";".join(parts)
    for index, (name, value) in enumerate(request.headers):
        if name == "Via":
            # The first Via header may hold several values; only its first one changes.
            request.headers[index] = (name, value.replace(top, new_top, 1))
            break
