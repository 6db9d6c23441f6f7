"""REFER (RFC 3515) inside a call's dialog: the peer asks Relay to call someone else (a blind
transfer), and Relay reports how that call goes in NOTIFYs of the implicit subscription.

Pure but for `Refer.notify`: `refer_target` reads the Refer-To into what to dial, or the
refusal it earns. The dialog (dialog.Dialog._refer) answers the REFER: its `on_refer` hook,
set by whoever holds the call (telephony.dial, for a bridged leg), decides; without one the
REFER is refused 403 and the call goes on untouched.

- RFC 3515 §2.4.1: "A REFER request MUST contain exactly one Refer-To header field value";
  none or several is 400.
- The Refer-To must be a sip:, sips: or tel: URI (else 400). A tel: URI, or a sip: URI whose
  user is a global number (`+` and digits, RFC 3966's visual separators dropped), is that
  phone number, dialled through the trunk; another sip: URI is dialled as it is. A Refer-To
  carrying `Replaces` (RFC 3891 §3, an attended transfer: the referrer's own call with the
  target) has it read by `refer_replaces`, and the target is sent it in Relay's INVITE.
- Accepted: 202 Accepted (§2.4.2), then NOTIFY `Event: refer` with a `message/sipfrag`
  body (§2.4.5): "SIP/2.0 100 Trying" at once, then the status line of the new call's final
  response, `Subscription-State: terminated;reason=noresource` (§2.4.6: the last one).
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from telephony.sip.message import Message, split_commas, uri_of, user_of

logger = logging.getLogger(__name__)

SCHEMES = ("sip", "sips", "tel")
SIPFRAG = "message/sipfrag;version=2.0"
SUBSCRIPTION_SECONDS = 60  # what the implicit subscription is said to last (§2.4.6)
_VISUAL = re.compile(r"[-.()]")  # RFC 3966 §5.1.1 visual separators
_GLOBAL = re.compile(r"^\+[0-9]{1,15}$")


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


def refer_target(request: Message) -> str | Refusal:
    """What a REFER asks Relay to dial: a phone number (E.164, `+` and digits) or a SIP URI
    (no parameters but its own, no headers); else the Refusal it earns."""
    values = [v for value in request.get_all("Refer-To") for v in split_commas(value)]
    if len(values) != 1:
        return Refusal(400, "Bad Request (exactly one Refer-To)")
    uri = uri_of(values[0]).strip()
    scheme, _, rest = uri.partition(":")
    scheme = scheme.lower()
    if scheme not in SCHEMES or not rest:
        return Refusal(400, "Bad Request (Refer-To is not a sip:, sips: or tel: URI)")
    address, _, headers = rest.partition("?")
    if _headers(headers).keys() - {"replaces"}:
        return Refusal(403, "Forbidden (a Refer-To header other than Replaces)")
    if scheme == "tel":
        number = _VISUAL.sub("", address.split(";", 1)[0])
        if not _GLOBAL.match(number):
            return Refusal(400, "Bad Request (a tel: Refer-To must be a global number)")
        return number
    user = _VISUAL.sub("", unquote(user_of(f"{scheme}:{address}")).split(";", 1)[0])
    if _GLOBAL.match(user):
        return user
    if "@" not in address:
        return Refusal(400, "Bad Request (a SIP Refer-To must name a user and a host)")
    return f"{scheme}:{address.split(';', 1)[0]}"


def _headers(text: str) -> dict[str, str]:
    """The headers of a URI (`?name=value&...`, RFC 3261 §19.1.1), names lowercased, values
    unescaped."""
    found = {}
    for part in text.split("&") if text else []:
        name, _, value = part.partition("=")
        found[unquote(name).strip().lower()] = unquote(value).strip()
    return found


def refer_replaces(request: Message) -> str:
    """The Replaces value (RFC 3891: `call-id;to-tag=...;from-tag=...`) a REFER's Refer-To
    carries as a URI header, unescaped; "" for none (a blind transfer)."""
    values = [v for value in request.get_all("Refer-To") for v in split_commas(value)]
    if len(values) != 1:
        return ""
    return _headers(uri_of(values[0]).partition("?")[2]).get("replaces", "")


@dataclass
class Refer:
    """A REFER accepted on `dialog`: `target` is what to dial; `notify` reports the new call's
    progress to the peer (sent in order, each awaited; a peer that left answers nothing,
    which is logged and no more)."""

    dialog: object
    target: str
    cseq: int
    replaces: str = ""  # an attended transfer's (RFC 3891), sent on in the target's INVITE
    sent: list[int] = field(default_factory=list)  # the statuses notified, in order
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def notify(self, status: int, reason: str) -> None:
        """NOTIFY `SIP/2.0 <status> <reason>`; a final status (>= 200) ends the
        subscription, and nothing is notified after it."""
        async with self._lock:
            if self.sent and self.sent[-1] >= 200:
                return
            self.sent.append(status)
            dialog = self.dialog
            request = dialog.request("NOTIFY")
            request.set("Event", f"refer;id={self.cseq}")
            state = (
                "terminated;reason=noresource"
                if status >= 200
                else f"active;expires={SUBSCRIPTION_SECONDS}"
            )
            request.set("Subscription-State", state)
            request.set("Contact", dialog.ua.contact())
            request.set("Content-Type", SIPFRAG)
            request.body = f"SIP/2.0 {status} {reason}\r\n".encode()
            response = await dialog.ua.request(request, destination=dialog.next_hop())
            if response is None or response.status >= 300:
                logger.info(
                    "call %s: NOTIFY of the transfer (%d) got %s",
                    dialog.sip_call_id,
                    status,
                    "no answer" if response is None else response.status,
                )
