"""The called side of a SIP call (RFC 3261 §13.3, §17.2.1): an INVITE from the trunk, answered
by Relay. It knows nothing of Django: the telephony agent (telephony/inbound/) decides what to
answer, and plays and records the audio through `stream`.

The INVITE server transaction is transaction.InviteServer, on the user agent's loop: 100
Trying at once, the last response again when the INVITE comes again, and a final response
resent over UDP until its ACK arrives or the transaction gives up (timers G and H for a
refusal, §13.3.1.4 and timer L for the 2xx), even after the call itself is over. CANCEL while
no final response has left ends the INVITE with 487. Every response that can set up the dialog
(101-299) copies the INVITE's Record-Route (§12.1.1).
"""

from __future__ import annotations

import asyncio
import logging
from functools import cached_property

from telephony.sip import sdp
from telephony.sip.dialog import ALLOW, Dialog, contact_uri
from telephony.sip.message import Message, new_tag, response_to, uri_of
from telephony.sip.rtp import RtpStream
from telephony.sip.transaction import (
    Action,
    Failed,
    FromTu,
    InviteServer,
    Received,
    TimedOut,
    Timer,
)

logger = logging.getLogger(__name__)


class InboundDialog(Dialog):
    """One INVITE Relay received, and the dialog it makes once answered. (The inbound call's
    ledger row is calls.Call; this is its SIP side.)"""

    def __init__(self, ua, invite: Message, source: tuple[str, int]) -> None:
        to_value = invite.get("To") or ""
        super().__init__(
            ua,
            sip_call_id=invite.sip_call_id,
            local_header=f"{to_value};tag={new_tag()}",
            remote_header=invite.get("From") or "",
            # §12.1.1: the remote target is the INVITE's Contact; the route set is its
            # Record-Route, in order.
            remote_target=contact_uri(invite.get("Contact")) or uri_of(invite.get("From") or ""),
            route_set=invite.get_all("Record-Route"),
        )
        self.invite, self.source = invite, source
        self.remote_cseq = invite.cseq[0]
        self.transaction = None  # the INVITE server transaction's driver, from trying()
        self.final_status = 0
        self.canceled = asyncio.Event()  # the caller gave up before an answer (CANCEL)
        self.remote_hangup = asyncio.Event()  # the caller's BYE, once answered
        self.ended = asyncio.Event()  # any of the above, or a final refusal
        self.stream: RtpStream | None = None
        self.rtp_port = 0

    @property
    def request_uri(self) -> str:
        return self.invite.uri

    # --- responses -------------------------------------------------------------------------
    def _response(self, status: int, reason: str) -> Message:
        # §8.2.6.2: 100 Trying carries no tag; every other response the dialog's own.
        # §12.1.1: "When a UAS responds to a request with a response that establishes a
        # dialog (such as a 2xx to INVITE), the UAS MUST copy all Record-Route header field
        # values from the request into the response ... and MUST maintain the order".
        # A 101-199 with a tag sets up an early dialog, so it copies them too.
        response = response_to(
            self.invite,
            status,
            reason,
            to_tag="" if status == 100 else self.local_tag,
            record_route=100 < status < 300,
        )
        if 100 < status < 300:
            response.set("Contact", self.ua.contact())
        return response

    def trying(self) -> None:
        """Start the INVITE server transaction, whose first act is 100 Trying (§17.2.1)."""
        self.transaction = self.ua.server_transaction(
            InviteServer, self.invite, self.source, tell=self._on_transaction
        )

    def _send(self, response: Message) -> None:
        self.transaction.feed(FromTu(response))

    def _on_transaction(self, report: Action) -> None:
        if isinstance(report, TimedOut) and report.timer is Timer.L:
            logger.warning("call %s: the caller never ACKed the answer", self.sip_call_id)
        elif isinstance(report, Failed):
            logger.warning(
                "call %s: a response could not be sent: %s", self.sip_call_id, report.reason
            )
        # The ACK of the 2xx, or timer H (a refusal never ACKed): nothing waits for either.

    async def ringing(self) -> None:
        if not self.final_status:
            self._send(self._response(180, "Ringing"))

    async def refuse(self, status: int, reason: str) -> None:
        """A final refusal (404, 603, 486...), re-sent until ACKed (timer G)."""
        if self.final_status:
            return
        self.final_status = status
        self._send(self._response(status, reason))
        self.ended.set()

    @cached_property
    def offer(self) -> tuple[sdp.MediaAnswer, sdp.Crypto | None] | None:
        """What the INVITE offers that Relay can answer: the media, and our SRTP key when the
        call is to be encrypted; None when Relay cannot answer it at all (no usable SDP, a
        plain offer under SIP_SRTP=required, or RTP/SAVP without a key Relay can use). Read
        once: routing asks before ringing, and the answer uses the same (and the same key)."""
        try:
            media = sdp.parse_offer(self.invite.body)
        except sdp.SdpError:
            return None
        srtp = self.ua.config.srtp
        crypto = sdp.new_crypto() if srtp != "off" and media.crypto is not None else None
        if crypto is None and (srtp == "required" or media.profile == sdp.SECURE):
            return None
        return media, crypto

    @property
    def local_crypto(self) -> sdp.Crypto | None:
        return self.offer[1] if self.offer is not None else None

    @property
    def established(self) -> bool:
        return self.final_status == 200

    @property
    def law(self) -> int | None:
        """The G.711 payload type of this call's audio: its stream's once answered, before
        that the one the answer will take; None when the offer cannot be answered."""
        if self.stream is not None:
            return self.stream.payload_type
        return self.offer[0].payload_type if self.offer is not None else None

    async def answer(self) -> sdp.MediaAnswer | None:
        """200 OK with an SDP answer to the INVITE's offer, on a stream of our own; the media
        chosen, or None when the offer is unusable (then 488, and the call is over)."""
        if self.final_status:
            return None
        offered = self.offer
        if offered is None:
            await self.refuse(488, "Not Acceptable Here")
            return None
        media, crypto = offered
        self.stream = self.ua.new_stream(payload_type=media.payload_type)
        self.rtp_port = await self.ua.open_rtp(self.stream)
        if crypto is not None:
            self.stream.secure(local_key=crypto.key, remote_key=media.crypto.key)
        self.follow(media)
        self.local_sdp = sdp.answer(
            address=self.ua.host, port=self.rtp_port, media=media, crypto=crypto
        )
        response = self._response(200, "OK")
        response.set("Allow", ALLOW)
        response.set("Content-Type", "application/sdp")
        response.body = self.local_sdp
        self.final_status = 200
        self._send(response)
        return media

    # --- requests of the INVITE transaction, then of the dialog ------------------------------
    async def on_request(self, request: Message, source: tuple[str, int]) -> None:
        method = request.method
        if method == "INVITE" and request.branch == self.invite.branch:
            # The INVITE again, once its transaction is over (while it lives, the user agent
            # hands it the INVITE resent): absorbed.
            return
        if method == "INVITE" and self.final_status != 200:
            # The same Call-ID in a new INVITE, not of this dialog: a second call it is not
            # (§8.2.2.2).
            await self.ua.respond(request, 482, "Loop Detected", source)
        elif method == "ACK" and request.cseq[0] == self.invite.cseq[0]:
            # The 2xx's ACK, a request of the dialog with a branch of its own: the INVITE
            # transaction takes it (RFC 6026's Accepted state), and resends the 2xx no more.
            self.transaction.feed(Received(request))
        elif method == "CANCEL" and request.branch == self.invite.branch:
            # §9.2: the CANCEL is answered 200 itself; the INVITE, if still unanswered, 487.
            await self.ua.respond(request, 200, "OK", source)
            if not self.final_status:
                self.final_status = 487
                self.canceled.set()
                self._send(self._response(487, "Request Terminated"))
                self.ended.set()
        else:
            await super().on_request(request, source)

    def on_remote_bye(self) -> None:
        self.remote_hangup.set()
        self.ended.set()

    async def hang_up(self) -> None:
        """BYE from our side of an answered call."""
        if self.remote_hangup.is_set() or self.final_status != 200 or self.bye_sent:
            return
        self.ended.set()
        await self.send_bye()

    def close(self) -> None:
        """Release the media; keep absorbing retransmissions for a little while
        (transaction.linger). A refusal goes on being re-sent until its ACK (timer G),
        whatever happens to the call."""
        self.ended.set()
        if self.stream is not None:
            self.stream.close()
        if self.rtp_port:
            self.ua.release_rtp_port(self.rtp_port)
            self.rtp_port = 0
        self.ua.forget_later(self.sip_call_id)
