"""SIP messages (RFC 3261 §7): parse what arrives, build what leaves.

Only what a user agent needs: the start line, headers in their order (compact names
expanded), and the body. Whatever arrives is bounded (MAX_MESSAGE_BYTES, MAX_HEADERS) and a
message that does not parse raises SipParseError; the transport drops it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

MAX_MESSAGE_BYTES = 64 * 1024
MAX_HEADERS = 128
COMPACT = {
    "i": "Call-ID",
    "f": "From",
    "t": "To",
    "v": "Via",
    "m": "Contact",
    "l": "Content-Length",
    "c": "Content-Type",
    "k": "Supported",
    "s": "Subject",
    "e": "Content-Encoding",
}
# Names as RFC 3261 spells them; any other header keeps its own spelling.
CANONICAL = {
    name.lower(): name
    for name in (
        "Call-ID",
        "CSeq",
        "From",
        "To",
        "Via",
        "Contact",
        "Content-Length",
        "Content-Type",
        "Max-Forwards",
        "Record-Route",
        "Route",
        "User-Agent",
        "WWW-Authenticate",
        "Proxy-Authenticate",
        "Authorization",
        "Proxy-Authorization",
        "Allow",
        "Supported",
        "Expires",
        "Reason",
    )
}
_REQUEST_LINE = re.compile(r"^([A-Z]+) (\S+) SIP/2\.0$")
_STATUS_LINE = re.compile(r"^SIP/2\.0 ([1-6]\d\d) ?(.*)$")


class SipParseError(ValueError):
    pass


def canonical(name: str) -> str:
    name = name.strip()
    lowered = name.lower()
    if lowered in COMPACT:
        return COMPACT[lowered]
    return CANONICAL.get(lowered, name)


@dataclass
class Message:
    """A request (method and uri set) or a response (status and reason set)."""

    method: str = ""
    uri: str = ""
    status: int = 0
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @property
    def is_request(self) -> bool:
        return bool(self.method)

    def get(self, name: str) -> str | None:
        name = canonical(name)
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def get_all(self, name: str) -> list[str]:
        name = canonical(name)
        values = []
        for key, value in self.headers:
            if key == name:
                # Via, Route and Record-Route may hold several comma-separated values.
                values.extend(split_commas(value) if name in _LISTS else [value])
        return values

    def set(self, name: str, value: str) -> None:
        name = canonical(name)
        self.headers = [(k, v) for k, v in self.headers if k != name]
        self.headers.append((name, value))

    @property
    def call_id(self) -> str:
        return self.get("Call-ID") or ""

    @property
    def cseq(self) -> tuple[int, str]:
        number, _, method = (self.get("CSeq") or "").partition(" ")
        try:
            return int(number), method.strip()
        except ValueError:
            return 0, method.strip()

    @property
    def branch(self) -> str:
        vias = self.get_all("Via")
        return params(vias[0]).get("branch", "") if vias else ""

    def encode(self) -> bytes:
        if self.is_request:
            lines = [f"{self.method} {self.uri} SIP/2.0"]
        else:
            lines = [f"SIP/2.0 {self.status} {self.reason}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k != "Content-Length"]
        lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


_LISTS = {"Via", "Route", "Record-Route"}


def split_commas(value: str) -> list[str]:
    """Comma-separated header values, commas inside <> or quotes kept."""
    parts, depth, quoted, current = [], 0, False, []
    for char in value:
        if char == '"':
            quoted = not quoted
        elif not quoted and char == "<":
            depth += 1
        elif not quoted and char == ">":
            depth -= 1
        if char == "," and depth <= 0 and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if current:
        parts.append("".join(current).strip())
    return [part for part in parts if part]


def params(value: str) -> dict[str, str]:
    """The `;name=value` parameters of a header value (after any <uri>), names lowercased."""
    tail = value.rsplit(">", 1)[1] if ">" in value else value
    out = {}
    for item in tail.split(";")[1:]:
        name, _, val = item.partition("=")
        if name.strip():
            out[name.strip().lower()] = val.strip().strip('"')
    return out


def uri_of(value: str) -> str:
    """The URI of a name-addr (`"Name" <sip:x@y>;tag=1`) or addr-spec (`sip:x@y;tag=1`)."""
    if "<" in value and ">" in value:
        return value[value.index("<") + 1 : value.index(">")]
    return value.split(";", 1)[0].strip()


def user_of(uri: str) -> str:
    """The user part of a SIP URI (`sip:+4420@host;user=phone` gives `+4420`)."""
    rest = uri.split(":", 1)[1] if ":" in uri else uri
    return rest.split("@", 1)[0] if "@" in rest else ""


def host_port_of(uri: str, default_port: int = 5060) -> tuple[str, int]:
    rest = uri.split(":", 1)[1] if uri.lower().startswith(("sip:", "sips:")) else uri
    rest = rest.split("@", 1)[1] if "@" in rest else rest
    rest = rest.split(";", 1)[0].split("?", 1)[0]
    if rest.startswith("["):  # IPv6 reference
        host, _, port = rest[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = rest.partition(":")
    return host, int(port) if port.isdigit() else default_port


def parse(data: bytes) -> Message:
    """One SIP message from a datagram or a framed stream chunk."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise SipParseError("message too large")
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = data.partition(b"\n\n")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SipParseError("headers are not UTF-8") from exc
    lines = text.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)  # keep-alive CRLFs before a message
    if not lines:
        raise SipParseError("empty message")
    message = Message()
    start = lines[0].strip()
    if match := _REQUEST_LINE.match(start):
        message.method, message.uri = match.group(1), match.group(2)
    elif match := _STATUS_LINE.match(start):
        message.status, message.reason = int(match.group(1)), match.group(2)
    else:
        raise SipParseError("bad start line")
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t" and message.headers:  # folded continuation
            name, value = message.headers[-1]
            message.headers[-1] = (name, f"{value} {line.strip()}")
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise SipParseError("bad header line")
        message.headers.append((canonical(name), value.strip()))
        if len(message.headers) > MAX_HEADERS:
            raise SipParseError("too many headers")
    length = message.get("Content-Length")
    if length is not None:
        if not length.isdigit():
            raise SipParseError("bad Content-Length")
        body = body[: int(length)]
    message.body = body
    if not message.call_id or not message.get("CSeq") or not message.get("Via"):
        raise SipParseError("missing Call-ID, CSeq or Via")
    return message


def new_tag() -> str:
    return secrets.token_hex(6)


def new_branch() -> str:
    return "z9hG4bK" + secrets.token_hex(8)


def new_call_id(host: str) -> str:
    return f"{secrets.token_hex(12)}@{host}"


def response_to(
    request: Message, status: int, reason: str, *, to_tag: str = "", record_route: bool = False
) -> Message:
    """A response copying Via, From, To, Call-ID and CSeq (RFC 3261 §8.2.6.2), and with
    `record_route` the request's Record-Route, in order (§12.1.1).

    §8.2.6.2: a response other than 100 whose request had no To tag MUST carry one: `to_tag`
    when given (a dialog's own), else a new one."""
    response = Message(status=status, reason=reason)
    if status != 100 and not to_tag:
        to_tag = new_tag()
    names = ("Via", "Record-Route", "From", "To", "Call-ID", "CSeq")
    for name in names if record_route else (n for n in names if n != "Record-Route"):
        for key, value in request.headers:
            if key == name:
                if name == "To" and to_tag and "tag" not in params(value):
                    value = f"{value};tag={to_tag}"
                response.headers.append((name, value))
    return response
