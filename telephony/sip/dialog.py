"""A SIP dialog (RFC 3261 §12): what the two ends of a call share once it is set up, and the
requests either end sends inside it. One class for both directions, the way PJSIP's
`pjsip_dialog` serves UAC and UAS alike: `uac.OutboundCall` (Relay called out) and
`uas.InboundDialog` (Relay was called) add only their side's INVITE transaction.

The dialog holds, in RFC 3261's words: the Call-ID, the local and remote tags (inside the
From and To values Relay sends), the local CSeq, the remote CSeq, the remote target (the
peer's Contact) and the route set (the Record-Route of the message that set the dialog up).

A re-INVITE (§14.2) is answered in either role through an INVITE server transaction of its
own (its 2xx resent until the ACK): its offer may change the stream's direction (hold and
resume, RFC 3264 §8.4), address, port, codec or SRTP key, and the answer follows it with the
session's `o=` version one more (§8); an offer Relay cannot take is answered 488 and the call
goes on as it was (§14.2, RFC 3261 "the UAS ... MUST leave the session unchanged").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from telephony.sip import sdp
from telephony.sip.message import (
    Message,
    host_port_of,
    new_branch,
    params,
    response_to,
    uri_of,
)
from telephony.sip.refer import Refer, Refusal, refer_replaces, refer_target
from telephony.sip.transaction import FromTu, InviteServer, Received

logger = logging.getLogger(__name__)

ALLOW = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, REFER"
# The bodies of an INFO that carry a key pressed: SIP INFO DTMF, as Cisco and most trunks send
# it (`Signal=5`), and the bare key of application/dtmf.
DTMF_TYPES = ("application/dtmf-relay", "application/dtmf")
KEYS = "0123456789*#ABCD"
MAX_FORWARDS = "70"  # §8.1.1.6: a UAC SHOULD send 70


def options_answer(request: Message) -> Message:
    """200 to an OPTIONS, in a dialog or not, with the methods this agent takes (§11.2)."""
    response = response_to(request, 200, "OK")
    response.set("Allow", ALLOW)
    return response


def contact_uri(value: str | None) -> str:
    """The URI of a Contact value, or "" when there is none."""
    return uri_of(value) if value else ""


def is_loose(route: str) -> bool:
    """Whether a Route/Record-Route entry names a loose router (`;lr`, RFC 3261 §19.1.1)."""
    uri = uri_of(route)
    return any(part.split("=", 1)[0].strip().lower() == "lr" for part in uri.split(";")[1:])


class Dialog:
    """The dialog state and what is done inside it; `ua` is the telephony.sip.ua.UserAgent
    that carries its messages.

    `local_header` and `remote_header` are the From and To values of the requests Relay
    sends in the dialog: the local one with Relay's tag, the remote one with the peer's tag
    once known (§12.2.1.1).
    """

    def __init__(
        self,
        ua,
        *,
        sip_call_id: str,
        local_header: str,
        remote_header: str,
        remote_target: str,
        route_set: list[str] | None = None,
        local_cseq: int = 0,
    ) -> None:
        self.ua = ua
        self.sip_call_id = sip_call_id
        self.local_header = local_header
        self.remote_header = remote_header
        self.remote_target = remote_target
        self.route_set: list[str] = list(route_set or [])
        self.local_cseq = local_cseq
        self.remote_cseq: int | None = None
        self.local_sdp = b""
        self.bye_sent = False
        # The call's media (each side sets `stream` once it has one), and the re-INVITE being
        # answered: its CSeq number and server transaction, which its ACK is handed to.
        self.stream = None
        self.rtp_port = 0
        self.reinvite: tuple[int, object] | None = None
        # Who decides on a REFER in this dialog (refer.py): given the accepted Refer, a
        # Refusal, or None to take it (202). None: every REFER is refused 403.
        self.on_refer: Callable[[Refer], Awaitable[Refusal | None]] | None = None

    @property
    def local_crypto(self) -> sdp.Crypto | None:
        """Relay's own SRTP key on this call, when it is encrypted."""
        return None

    @property
    def established(self) -> bool:
        """Whether the INVITE that set the dialog up has its 2xx (a confirmed dialog)."""
        return True

    @property
    def local_tag(self) -> str:
        return params(self.local_header).get("tag", "")

    @property
    def remote_tag(self) -> str:
        return params(self.remote_header).get("tag", "")

    # --- requests out (§12.2.1.1) ------------------------------------------------------------
    def request(self, method: str, *, cseq: int | None = None, branch: str = "") -> Message:
        """A request inside the dialog. With a route set whose first entry is a loose router,
        the Request-URI is the remote target and the route set goes into Route as it is;
        with a strict router first, the Request-URI is that router and the remote target
        goes last in Route (§12.2.1.1)."""
        if cseq is None:
            self.local_cseq += 1
            cseq = self.local_cseq
        uri, routes = self.remote_target, list(self.route_set)
        if routes and not is_loose(routes[0]):
            uri = _strip_uri_headers(uri_of(routes[0]))
            routes = [*routes[1:], f"<{self.remote_target}>"]
        message = Message(method=method, uri=uri)
        message.headers = [
            ("Via", self.ua.via(branch or new_branch())),
            ("Max-Forwards", MAX_FORWARDS),
            ("From", self.local_header),
            ("To", self.remote_header),
            ("Call-ID", self.sip_call_id),
            ("CSeq", f"{cseq} {method}"),
            # The route set as one Route header, in order (§7.3.1 allows either form).
            *((("Route", ", ".join(routes)),) if routes else ()),
            ("User-Agent", self.ua.config.user_agent),
        ]
        return message

    def next_hop(self) -> tuple[str, int]:
        """Where a request in the dialog goes: the first route, else the remote target
        (RFC 3261 §8.1.2 and RFC 3263)."""
        target = uri_of(self.route_set[0]) if self.route_set else self.remote_target
        return host_port_of(target, self.ua.default_port)

    async def send_bye(self) -> None:
        """Hang up: BYE in its own non-INVITE transaction. Sent once."""
        if self.bye_sent:
            return
        self.bye_sent = True
        response = await self.ua.request(self.request("BYE"), destination=self.next_hop())
        if response is None:
            logger.warning("call %s: BYE got no answer", self.sip_call_id)

    # --- requests in -------------------------------------------------------------------------
    async def on_request(self, request: Message, source: tuple[str, int]) -> None:
        """A request of this dialog's Call-ID (the UAC and the UAS add their transaction's
        own requests in front of this)."""
        if request.method == "ACK":
            if self.reinvite is not None and self.reinvite[0] == request.cseq[0]:
                # The ACK of a re-INVITE's 2xx: its transaction stops resending the 2xx.
                self.reinvite[1].feed(Received(request))
            return  # any other ACK is of nothing this dialog waits for: absorbed (§17.2.3)
        if params(request.get("To") or "").get("tag", "") != self.local_tag:
            # §12.2.2: a request with a To tag that matches no dialog gets 481.
            await self.ua.respond(request, 481, "Call/Transaction Does Not Exist", source)
            return
        number, _ = request.cseq
        if self.remote_cseq is not None and number < self.remote_cseq:
            # §12.2.2: "If the remote sequence number ... is lower than ... the UAS
            # MUST reject the request with a 500 (Server Internal Error) response."
            await self.ua.respond(request, 500, "Server Internal Error", source)
            return
        self.remote_cseq = number
        if request.method == "BYE":
            await self.ua.respond(request, 200, "OK", source)
            self.on_remote_bye()
        elif request.method == "INVITE":
            await self._reinvite(request, source)
        elif request.method == "OPTIONS":
            await self.ua.reply(request, options_answer(request), source)
        elif request.method == "INFO":
            await self._info(request, source)
        elif request.method == "REFER":
            await self._refer(request, source)
        elif request.method == "CANCEL":
            # A CANCEL matching no pending INVITE transaction (§9.2).
            await self.ua.respond(request, 481, "Call/Transaction Does Not Exist", source)
        # Any other method was answered 405 or 501 by checks.check_request before this.

    async def _reinvite(self, request: Message, source: tuple[str, int]) -> None:
        """A re-INVITE (§14.2). With an offer, the media follows it (`take_offer`) and the 200
        carries the answer; an offer Relay cannot take gets 488 and changes nothing. Without
        one, the 200 offers the session as it is. Its Contact is the new remote target (§12.2.2,
        target refresh) once it is accepted."""
        if not self.ua.accepts_source(source[0]):
            # A re-INVITE moves the media: it must come from where an INVITE may (the trunk's
            # hosts), whoever learnt the dialog's Call-ID and tags.
            logger.warning(
                "call %s: re-INVITE refused: %s is not an allowed source",
                self.sip_call_id,
                source[0],
            )
            await self.ua.respond(request, 403, "Forbidden", source)
            return
        if not self.established or not self.local_sdp or self.stream is None:
            # Not answered yet (an early dialog, where §14.1 allows no re-INVITE): it crosses
            # the INVITE still pending, and gets §14.2's 491.
            await self.ua.respond(request, 491, "Request Pending", source)
            return
        transaction = self.ua.server_transaction(
            InviteServer, request, source, tell=_nothing_to_tell
        )
        self.reinvite = (request.cseq[0], transaction)
        if request.body:
            try:
                self.take_offer(request.body)
            except sdp.SdpError as exc:
                logger.info("call %s: re-INVITE refused (488): %s", self.sip_call_id, exc)
                response = response_to(request, 488, "Not Acceptable Here", to_tag=self.local_tag)
                transaction.feed(FromTu(response))
                return
        if target := contact_uri(request.get("Contact")):
            self.remote_target = target
        response = response_to(request, 200, "OK", to_tag=self.local_tag)
        response.set("Contact", self.ua.contact())
        response.set("Allow", ALLOW)
        response.set("Content-Type", "application/sdp")
        response.body = self.local_sdp
        transaction.feed(FromTu(response))

    def accepts_peer(self, host: str) -> bool:
        """Whether a request that moves the call (a REFER) may come from `host`: the hosts an
        INVITE may come from (the trunk's)."""
        return self.ua.accepts_source(host)

    async def _refer(self, request: Message, source: tuple[str, int]) -> None:
        """A REFER (RFC 3515): refused 403 where nobody takes one (`on_refer` None: a call
        not bridged, or not one a transfer applies to), from a source that may not move the
        call, or as `on_refer` says; a Refer-To that cannot be read is 400 (refer.py). Taken,
        it is answered 202 and the peer is told "100 Trying" at once; whoever took it
        notifies the rest. Either way the call goes on untouched until then."""
        found = refer_target(request)
        refusal = found if isinstance(found, Refusal) else None
        if refusal is None and (self.on_refer is None or not self.established):
            refusal = Refusal(403, "Forbidden (no transfer on this call)")
        if refusal is None and not self.accepts_peer(source[0]):
            logger.warning(
                "call %s: REFER refused: %s is not an allowed source", self.sip_call_id, source[0]
            )
            refusal = Refusal(403, "Forbidden")
        refer = None
        if refusal is None:
            refer = Refer(
                dialog=self,
                target=found,
                cseq=request.cseq[0],
                replaces=refer_replaces(request),
            )
            refusal = await self.on_refer(refer)
        if refusal is not None:
            logger.info(
                "call %s: REFER refused: %d %s", self.sip_call_id, refusal.status, refusal.reason
            )
            await self.ua.respond(request, refusal.status, refusal.reason, source)
            return
        response = response_to(request, 202, "Accepted", to_tag=self.local_tag)
        response.set("Contact", self.ua.contact())
        await self.ua.reply(request, response, source)
        logger.info("call %s: REFER taken: a transfer", self.sip_call_id)
        await refer.notify(100, "Trying")

    def take_offer(self, body: bytes) -> None:
        """Answer a re-INVITE's offer: check that Relay can take it (a codec it speaks, the
        call's SRTP kept), then point the stream at it (`follow`) and make the answer, the
        previous description when nothing changed, else one with its version one more
        (sdp.revised). Raises SdpError, touching nothing, when the offer cannot be taken."""
        stream = self.stream
        media = sdp.parse_offer(body, prefer=stream.payload_type)
        crypto = self.local_crypto if stream.srtp_out is not None else None
        if stream.srtp_out is not None and media.crypto is None:
            raise sdp.SdpError("the call is encrypted and the offer has no SRTP key")
        if stream.srtp_out is None and media.profile == sdp.SECURE:
            raise sdp.SdpError("an RTP/SAVP offer on a call without SRTP")
        answer = sdp.answer(address=self.ua.host, port=self.rtp_port, media=media, crypto=crypto)
        self.local_sdp = sdp.revised(self.local_sdp, answer)
        self.follow(media)
        if crypto is not None and media.crypto.key != stream.remote_key:
            stream.rekey(media.crypto.key)
        logger.info(
            "call %s: re-INVITE taken: %s, %s",
            self.sip_call_id,
            sdp.answer_direction(media),
            sdp.CODECS[media.payload_type],
        )

    def follow(self, media: sdp.MediaAnswer) -> None:
        """Send audio as the far end's SDP (an offer or an answer) says: its codec, its
        telephone-event, its address and port (the latch starts again when they change), and
        nothing at all while it takes none (hold, rtp.RtpStream.hold). An address of 0.0.0.0
        leaves the last one in place, for the resume."""
        stream = self.stream
        stream.payload_type = media.payload_type
        stream.dtmf_payload_type = media.telephone_event
        if media.host != sdp.HOLD_ADDRESS and stream.latch.expected != (media.host, media.port):
            stream.expect(media.host, media.port)
        stream.hold(not media.receives)

    async def _info(self, request: Message, source: tuple[str, int]) -> None:
        """An INFO (RFC 6086): a key pressed, sent in SIP rather than in the media (RFC 4733);
        it goes where the media's keys go (`on_key`). An empty INFO (a keep-alive) is
        answered 200; a body of another type 415, naming the ones taken."""
        media_type = (request.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if not request.body:
            await self.ua.respond(request, 200, "OK", source)
            return
        if media_type not in DTMF_TYPES:
            response = response_to(request, 415, "Unsupported Media Type")
            response.set("Accept", ", ".join(DTMF_TYPES))
            await self.ua.reply(request, response, source)
            return
        key = _dtmf_key(request.body.decode("latin-1"), relay=media_type == DTMF_TYPES[0])
        if key is None:
            await self.ua.respond(request, 400, "Bad Request (no key in the DTMF body)", source)
            return
        await self.ua.respond(request, 200, "OK", source)
        self.on_key(key)

    def on_key(self, key: str) -> None:
        """A key the peer pressed, by SIP INFO: handed to the media stream's listener, so a
        key arrives the same way whichever way it was sent."""
        stream = getattr(self, "stream", None)
        if stream is not None and stream.on_dtmf is not None:
            stream.on_dtmf(key)

    def on_remote_bye(self) -> None:
        """The peer hung up (its BYE was answered 200)."""
        raise NotImplementedError

    def on_response(self, response: Message) -> None:
        """A response that matched no transaction (a late retransmission): by default,
        nothing to do."""


def _nothing_to_tell(report) -> None:
    """A re-INVITE's transaction tells nothing anyone waits for (its ACK, a timeout)."""


def _dtmf_key(body: str, *, relay: bool) -> str | None:
    """The key of a DTMF INFO body: `Signal=5` (application/dtmf-relay, one field a line),
    or the key alone (application/dtmf); None when there is none. `*` may come as 10 and
    `#` as 11, as some senders write them."""
    if relay:
        fields = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition("=") for line in body.splitlines())
        )
        value = fields.get("signal", "")
    else:
        value = body.strip()
    value = {"10": "*", "11": "#"}.get(value, value).upper()
    return value if len(value) == 1 and value in KEYS else None


def _strip_uri_headers(uri: str) -> str:
    # §12.2.1.1: the Request-URI made from a strict router's URI carries no headers or
    # method parameter.
    return uri.split("?", 1)[0]
