"""SIP messages (RFC 3261 §7): parse what arrives, build what leaves.

Only what a user agent needs: the start line, headers in their order (compact names
expanded), and the body. Whatever arrives is bounded (MAX_MESSAGE_BYTES, MAX_HEADERS).

`parse` is a pure function of the bytes, in the manner of h11: no I/O, no answer. It raises
SipParseError only for what cannot be answered at all (no start line, no Via, From, To,
Call-ID or CSeq to build a response from): the transport drops that. Anything else it returns
as a Message, and what it found wrong with the grammar of RFC 3261 §25 is listed in
`Message.defects`; telephony/sip/checks.py decides what that earns (400 for a request, the
bin for a response). RFC 4475's torture messages are its tests.
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
    "r": "Refer-To",  # RFC 3515 §2.1
    "o": "Event",  # RFC 6665 §8.2.1
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
        "Require",
        "Proxy-Require",
        "Unsupported",
        "Accept",
        "Accept-Encoding",
        "Content-Encoding",
        "Date",
        "Subject",
    )
}
SIP_VERSION = "SIP/2.0"
_TOKEN = r"[A-Za-z0-9\-.!%*_+`'~]+"  # RFC 3261 §25.1 token
_WORD = r"[A-Za-z0-9\-.!%*_+`'~()<>:\\\"/\[\]?{}]+"  # §25.1 word (Call-ID)
# Request-Line = Method SP Request-URI SP SIP-Version CRLF (§7.1), exactly one SP each.
_REQUEST_LINE = re.compile(rf"^({_TOKEN}) ([^ \t]+) SIP/2\.0$")
_SIP_VERSION = re.compile(r"^SIP/\d+\.\d+$")
# Status-Line = SIP-Version SP Status-Code SP Reason-Phrase (§7.2); a missing SP before an
# empty phrase is forgiven.
_STATUS_LINE = re.compile(r"^SIP/2\.0 ([1-6]\d\d)(?: (.*))?$")
_TOKEN_ONLY = re.compile(rf"^{_TOKEN}$")
_CALL_ID = re.compile(rf"^{_WORD}(@{_WORD})?$")
_CSEQ = re.compile(rf"^(\d+)[ \t]+({_TOKEN})$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"]+$")
_VIA = re.compile(
    rf"^{_TOKEN}[ \t]*/[ \t]*{_TOKEN}[ \t]*/[ \t]*{_TOKEN}[ \t]+"  # SIP / 2.0 / UDP
    r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)([ \t]*:[ \t]*\d+)?"  # sent-by
    r"[ \t]*(;.*)?$"
)
_GMT_DATE = re.compile(  # rfc1123-date, and GMT only (§20.17)
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$"
)
# Header fields a message may carry once only (§7.3.1: only those defined as a
# comma-separated list may appear more than once).
SINGLE = ("From", "To", "Call-ID", "CSeq", "Max-Forwards", "Content-Length", "Content-Type", "Date")
NOT_GMT = "a Date not in GMT"  # RFC 4475 3.1.2.12: an error only where the Date matters
# Without these a response cannot be built (§8.2.6.2) nor matched to a transaction (§17.1.3).
ESSENTIAL = ("Via", "From", "To", "Call-ID", "CSeq")


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
    version: str = SIP_VERSION
    # What parse() found against the grammar, in words; empty for a well-formed message.
    defects: list[str] = field(default_factory=list)

    @property
    def is_request(self) -> bool:
        return bool(self.method)

    def get(self, name: str) -> str | None:
        name = canonical(name).lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def get_all(self, name: str) -> list[str]:
        name = canonical(name)
        values = []
        for key, value in self.headers:
            if key.lower() == name.lower():
                # Via, Route and Record-Route may hold several comma-separated values.
                values.extend(split_commas(value) if name in _LISTS else [value])
        return values

    def set(self, name: str, value: str) -> None:
        name = canonical(name)
        self.headers = [(k, v) for k, v in self.headers if k != name]
        self.headers.append((name, value))

    @property
    def sip_call_id(self) -> str:
        return self.get("Call-ID") or ""

    @property
    def cseq(self) -> tuple[int, str]:
        number, _, method = (self.get("CSeq") or "").strip().partition(" ")
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
    return [part for part in _elements(value) if part]


def _elements(value: str) -> list[str]:
    """The comma-separated elements of a header value, empty ones included."""
    parts, depth, quoted, escaped, current = [], 0, False, False, []
    for char in value:
        if escaped:  # a quoted-pair: `\"` does not end the string
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
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
    parts.append("".join(current).strip())
    return parts


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
    """One SIP message from a datagram or a framed stream chunk. SipParseError when it is no
    message, or one that cannot be answered; otherwise the message, with `defects`."""
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
    _start_line(message, lines[0])
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t":  # folded continuation (LWS, §7.3.1)
            if message.headers:
                name, value = message.headers[-1]
                message.headers[-1] = (name, f"{value} {line.strip()}".strip())
            else:
                message.defects.append("a continuation line before any header")
            continue
        name, colon, value = line.partition(":")
        name = name.rstrip(" \t")  # HCOLON = *( SP / HTAB ) ":" SWS
        if not colon or not _TOKEN_ONLY.match(name):
            message.defects.append("a line that is no header")
            continue
        message.headers.append((canonical(name), value.strip()))
        if len(message.headers) > MAX_HEADERS:
            raise SipParseError("too many headers")
    missing = [name for name in ESSENTIAL if message.get(name) is None]
    if missing:
        raise SipParseError(f"no {', '.join(missing)}")
    message.body = _body(message, body)
    message.defects += _header_defects(message)
    return message


def _start_line(message: Message, line: str) -> None:
    if match := _REQUEST_LINE.match(line):
        message.method, message.uri = match.group(1), match.group(2)
    elif match := _STATUS_LINE.match(line):
        message.status, message.reason = int(match.group(1)), match.group(2) or ""
    elif loose := _loose_request_line(line):
        # A request still, and answerable: 505 for another version (§21.5.6, RFC 4475
        # 3.1.2.16), 400 for the extra whitespace (3.1.2.8-10).
        message.method, message.uri, message.version = loose
        if message.version == SIP_VERSION:
            message.defects.append("whitespace in the request line")
    else:
        raise SipParseError("bad start line")
    if message.is_request:
        message.defects += _request_uri_defects(message.uri)


def _loose_request_line(line: str) -> tuple[str, str, str] | None:
    """Method, Request-URI and version of a request line with any whitespace in it, or of
    any version. Split by hand: a regular expression would backtrack for ever on a line of
    64 KB of spaces."""
    words = line.split()
    if len(words) < 3 or not _TOKEN_ONLY.match(words[0]) or not _SIP_VERSION.match(words[-1]):
        return None
    method, version = words[0], words[-1]
    uri = line.strip()[len(method) : -len(version)].strip()
    return method, uri, version


def _body(message: Message, body: bytes) -> bytes:
    """The body as Content-Length bounds it. §18.3: "If there are additional bytes in the
    transport packet beyond the end of the body, they MUST be discarded. If the transport
    packet ends before the end of the message body, this is considered an error."
    """
    lengths = [value for key, value in message.headers if key == "Content-Length"]
    if not lengths:
        return body  # §18.3: over UDP the body runs to the end of the datagram
    if len(lengths) > 1:
        return body  # told as a duplicate by _header_defects
    if not lengths[0].isdigit():
        message.defects.append("Content-Length is not a number")
        return body
    length = int(lengths[0])
    if length > len(body):
        message.defects.append("Content-Length longer than the body")
        return body
    return body[:length]


def _request_uri_defects(uri: str) -> list[str]:
    if not _URI.match(uri):  # <sip:...>, embedded spaces (RFC 4475 3.1.2.7-8)
        return ["the Request-URI is not a URI"]
    scheme, _, rest = uri.partition(":")
    # §19.1.1, table 1: a Request-URI carries no headers (RFC 4475 3.1.2.11). A user part
    # may hold a `?`, so look only past its `@`.
    if scheme.lower() in ("sip", "sips") and "?" in rest.rsplit("@", 1)[-1]:
        return ["headers in the Request-URI"]
    return []


def _header_defects(message: Message) -> list[str]:
    defects = []
    names = [key for key, _ in message.headers]
    for name in SINGLE:
        if names.count(name) > 1:
            defects.append(f"more than one {name}")  # RFC 4475 3.3.8, 3.3.9
    number_method = _CSEQ.match(message.get("CSeq") or "")
    # §8.1.1.5: "The sequence number value MUST be expressible as a 32-bit unsigned integer
    # and MUST be less than 2**31."
    if number_method is None or int(number_method.group(1)) >= 2**31:
        defects.append("an unreadable CSeq")
    if not _CALL_ID.match(message.get("Call-ID") or ""):
        defects.append("an unreadable Call-ID")
    max_forwards = message.get("Max-Forwards")
    if max_forwards is not None and not max_forwards.isdigit():
        defects.append("an unreadable Max-Forwards")
    date = message.get("Date")
    if date is not None and not _GMT_DATE.match(date):
        defects.append(NOT_GMT)
    for key, value in message.headers:
        if not _value_ok(key, value):
            defects.append(f"an unreadable {key}")  # RFC 4475 3.1.2.1, 3.1.2.6, 3.1.2.13-15
    return list(dict.fromkeys(defects))


def _value_ok(name: str, value: str) -> bool:
    """Whether the value of a Via or address header reads by the grammar; others are not
    looked at."""
    if name == "Via":
        for element in _elements(value):
            match = _VIA.match(element)
            if not match or not _params_ok(match.group(3) or ""):
                return False
    elif name in ("From", "To"):
        return _address_ok(value)
    elif name in ("Contact", "Route", "Record-Route") and value != "*":
        return all(_address_ok(element) for element in _elements(value))
    return True


def _address_ok(value: str) -> bool:
    """name-addr or addr-spec, then header parameters (§20.10, §25.1)."""
    rest = value.strip()
    if rest.startswith('"'):
        end = _quoted_end(rest)
        if end < 0:
            return False  # unterminated (RFC 4475 3.1.2.6)
        rest = rest[end:].lstrip()
        if not rest.startswith("<"):
            return False
    elif "<" in rest:
        # display-name = *(token LWS): a comma or other separator must be quoted (RFC 4475
        # 3.1.2.15). No LWS before "<" is forgiven (3.1.1.6).
        display, rest = rest.split("<", 1)
        rest = "<" + rest
        if not all(_TOKEN_ONLY.match(word) for word in display.split()):
            return False
    if rest.startswith("<"):
        uri, closed, tail = rest[1:].partition(">")
        # No whitespace inside <> (RFC 4475 3.1.2.14).
        return bool(closed) and bool(_URI.match(uri)) and _params_ok(tail)
    # An addr-spec: §20.10 "if the URI contains a comma, question mark or semicolon, the URI
    # MUST be enclosed in angle brackets" (RFC 4475 3.1.2.13); its semicolons begin the
    # header's parameters.
    uri, semi, tail = rest.partition(";")
    uri = uri.strip()
    return bool(_URI.match(uri)) and "?" not in uri and _params_ok(semi + tail)


def _quoted_end(text: str) -> int:
    """The index just past the quoted-string `text` starts with; -1 if it never ends."""
    index = 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == '"':
            return index + 1
        index += 1
    return -1


# SEMI generic-param, generic-param = token [ EQUAL gen-value ], gen-value = token / host /
# quoted-string, with SWS around ";" and "=".
_QUOTED = r'"(?:[^"\\]|\\.)*"'  # quoted-string, quoted-pairs in it
_PARAM = re.compile(
    rf"[ \t]*;[ \t]*{_TOKEN}(?:[ \t]*=[ \t]*(?:{_QUOTED}|[A-Za-z0-9\-.!%*_+`'~\[\]:]+))?[ \t]*"
)


def _params_ok(text: str) -> bool:
    """*( SEMI generic-param ): no empty parameter (RFC 4475 3.1.2.1)."""
    position = 0
    while position < len(text):
        match = _PARAM.match(text, position)
        if match is None:
            return False
        position = match.end()
    return True


def stream_content_length(head: bytes) -> int:
    """The body length of a message on a stream, from its header bytes. §18.3: "In the case of
    stream-oriented transports such as TCP, the Content-Length header field indicates the size
    of the body"; none is taken as 0. SipParseError when it cannot tell (negative, not a
    number, or more than one: RFC 4475 3.1.2.3 and 3.3.9): the stream cannot be framed."""
    lengths = []
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() in (b"content-length", b"l"):
            lengths.append(value.strip())
    if not lengths:
        return 0
    if len(lengths) > 1 or not lengths[0].isdigit():
        raise SipParseError("no usable Content-Length on a stream")
    return int(lengths[0])


def new_tag() -> str:
    return secrets.token_hex(6)


def new_branch() -> str:
    return "z9hG4bK" + secrets.token_hex(8)


def new_sip_call_id(host: str) -> str:
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
                if name not in ("Via", "Record-Route"):
                    break  # one each, even when a malformed request held two (RFC 4475 3.3.8)
    return response
