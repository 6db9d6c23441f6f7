"""The called side of a SIP call (RFC 3261 §13.3, §17.2.1): an INVITE from the trunk, answered
by Relay. It knows nothing of Django: the telephony agent (telephony/inbound.py) decides
what to answer, and plays and records the audio through `stream`.

The INVITE server transaction: 100 Trying at once; every response re-sent when the INVITE is
re-sent; a final response re-sent over UDP from T1, doubling to T2, until its ACK arrives or
64*T1 has passed (timers G and H for a refusal; §13.3.1.4 for the 2xx). CANCEL while no final
response has left ends the INVITE with 487. In the dialog: BYE either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from telephony.sip import sdp
from telephony.sip.message import Message, new_branch, new_tag, response_to, uri_of
from telephony.sip.rtp import RtpStream

logger = logging.getLogger(__name__)

T2 = 4.0


class InboundCall:
    """One INVITE Relay received, and the dialog it makes once answered."""

    def __init__(self, ua, invite: Message, source: tuple[str, int]) -> None:
        # `ua` is the telephony.sip.ua.UserAgent that received the INVITE (not imported:
        # ua imports this module).
        self.ua, self.invite, self.source = ua, invite, source
        self.call_id = invite.call_id
        self.local_tag = new_tag()
        self.last_response: Message | None = None
        self.final_status = 0
        self.acked = asyncio.Event()
        self.canceled = asyncio.Event()  # the caller gave up before an answer (CANCEL)
        self.remote_hangup = asyncio.Event()  # the caller's BYE, once answered
        self.ended = asyncio.Event()  # any of the above, or a final refusal
        self.cseq = 0
        self.bye_sent = False
        self.remote_target = uri_of(invite.get("Contact") or invite.get("From") or "")
        self.route = invite.get_all("Record-Route")
        self.stream: RtpStream | None = None
        self.rtp_port = 0
        self.local_sdp = b""
        self._retransmit: asyncio.Task | None = None

    @property
    def request_uri(self) -> str:
        return self.invite.uri

    # --- responses -------------------------------------------------------------------------
    def _response(self, status: int, reason: str) -> Message:
        # 100 Trying carries no tag (§8.2.6.2); every other response the dialog's own.
        return response_to(
            self.invite, status, reason, to_tag="" if status == 100 else self.local_tag
        )

    async def _send(self, response: Message) -> None:
        self.last_response = response
        await self.ua.transport.send(response, self.source)

    async def trying(self) -> None:
        await self._send(self._response(100, "Trying"))

    async def ringing(self) -> None:
        if not self.final_status:
            response = self._response(180, "Ringing")
            response.set("Contact", self.ua.contact())
            await self._send(response)

    async def refuse(self, status: int, reason: str) -> None:
        """A final refusal (404, 603, 486...), re-sent until ACKed (timer G)."""
        if self.final_status:
            return
        self.final_status = status
        await self._final(self._response(status, reason))
        self.ended.set()

    async def answer(self) -> sdp.MediaAnswer | None:
        """200 OK with an SDP answer to the INVITE's offer, on a stream of our own; the media
        chosen, or None when the offer is unusable (then 488, and the call is over)."""
        if self.final_status:
            return None
        try:
            media = sdp.parse_offer(self.invite.body)
        except sdp.SdpError:
            await self.refuse(488, "Not Acceptable Here")
            return None
        self.stream = RtpStream(payload_type=media.payload_type)
        self.rtp_port = await self.ua.open_rtp(self.stream)
        self.stream.remote = (media.host, media.port)
        self.stream.only_from_remote = True
        self.stream.dtmf_payload_type = media.telephone_event
        self.local_sdp = sdp.answer(address=self.ua.host, port=self.rtp_port, media=media)
        response = self._response(200, "OK")
        response.set("Contact", self.ua.contact())
        response.set("Allow", self.ua.allow)
        response.set("Content-Type", "application/sdp")
        response.body = self.local_sdp
        self.final_status = 200
        await self._final(response)
        return media

    async def _final(self, response: Message) -> None:
        await self._send(response)
        if not self.ua.transport.reliable:
            self._retransmit = asyncio.ensure_future(self._resend_until_acked(response))

    async def _resend_until_acked(self, response: Message) -> None:
        loop = asyncio.get_running_loop()
        t1 = self.ua.config.t1
        deadline, interval = loop.time() + 64 * t1, t1
        while (remaining := deadline - loop.time()) > 0:
            try:
                await asyncio.wait_for(self.acked.wait(), min(interval, remaining))
                return
            except TimeoutError:
                await self.ua.transport.send(response, self.source)
                interval = min(interval * 2, T2)
        if response.status == 200:
            logger.warning("call %s: the caller never ACKed the answer", self.call_id)

    async def wait_for_ack(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.acked.wait(), timeout)
        return self.acked.is_set()

    # --- requests in the transaction and the dialog ----------------------------------------
    async def on_request(self, request: Message, source: tuple[str, int]) -> None:
        method = request.method
        if method == "INVITE":
            if request.branch == self.invite.branch:
                if self.last_response is not None:  # the INVITE again: the last answer again
                    await self.ua.transport.send(self.last_response, source)
            elif "tag=" in (request.get("To") or "") and self.final_status == 200:
                # A re-INVITE (a session refresh): keep the media as it is.
                response = response_to(request, 200, "OK")
                response.set("Contact", self.ua.contact())
                response.set("Content-Type", "application/sdp")
                response.body = self.local_sdp
                await self.ua.transport.send(response, source)
            else:
                # The same Call-ID in a new INVITE: a second call it is not (§8.2.2.2).
                await self.ua.transport.send(response_to(request, 482, "Loop Detected"), source)
        elif method == "ACK":
            if request.cseq[0] == self.invite.cseq[0]:  # not the ACK of a 482 above
                self.acked.set()
        elif method == "CANCEL":
            await self.ua.transport.send(response_to(request, 200, "OK"), source)
            if not self.final_status:
                self.final_status = 487
                self.canceled.set()
                await self._final(self._response(487, "Request Terminated"))
                self.ended.set()
        elif method == "BYE":
            await self.ua.transport.send(response_to(request, 200, "OK"), source)
            self.remote_hangup.set()
            self.ended.set()
        elif method == "OPTIONS":
            response = response_to(request, 200, "OK")
            response.set("Allow", self.ua.allow)
            await self.ua.transport.send(response, source)
        else:
            response = response_to(request, 405, "Method Not Allowed")
            response.set("Allow", self.ua.allow)
            await self.ua.transport.send(response, source)

    async def hang_up(self) -> None:
        """BYE from our side of an answered call (the caller's From is now our To)."""
        if self.remote_hangup.is_set() or self.final_status != 200 or self.bye_sent:
            return
        self.bye_sent = True
        self.ended.set()
        self.cseq += 1
        invite = self.invite
        bye = Message(method="BYE", uri=self.remote_target)
        bye.headers = [
            ("Via", self.ua.via(new_branch())),
            ("Max-Forwards", "70"),
            ("From", f"{invite.get('To')};tag={self.local_tag}"),
            ("To", invite.get("From") or ""),
            ("Call-ID", self.call_id),
            ("CSeq", f"{self.cseq} BYE"),
            *(("Route", route) for route in self.route),
            ("User-Agent", self.ua.config.user_agent),
        ]
        if await self.ua.request(bye, destination=self.source) is None:
            logger.warning("call %s: BYE got no answer", self.call_id)

    def close(self) -> None:
        """Release the media; keep absorbing retransmissions for a little while (64*T1)."""
        self.ended.set()
        if self._retransmit is not None:
            self._retransmit.cancel()
        if self.stream is not None:
            self.stream.close()
        if self.rtp_port:
            self.ua.release_rtp_port(self.rtp_port)
            self.rtp_port = 0
        asyncio.get_running_loop().call_later(
            64 * self.ua.config.t1, self.ua.inbound.pop, self.call_id, None
        )
