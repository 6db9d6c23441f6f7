"""Log records: no secret in any line, no line forged by a value a client sent, the request's
id on every line, and JSON lines on `LOG_FORMAT=json`.

Defence in depth for the rule "no secret in any log line":
Code never logs a token, key, password or PIN on purpose; this filter also scrubs anything
that looks like one (a JWT, a Relay API key, an Authorization value, a token query parameter)
from every record, in case a library logs a request it was handed.
"""

import logging
import re

import pythonjsonlogger.json

from core import requestid

_PATTERNS = [
    re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # JWT
    re.compile(r"vr_[A-Za-z0-9_-]{20,}"),  # API key
    re.compile(r"(?i)(bearer\s+)[^\s\"',]+"),
    re.compile(r"(?i)((?:token|password|pin|currentPin|newPin|apiKey|api_key)=)[^&\s\"']+"),
    # A mailed link's token in the path of the console page it opens, wherever a line shows
    # it (Django's own "Bad Request: <path>"); the access line has it as [token] already.
    re.compile(r"(/(?:verify-email|password-reset|invitations)/)(?!\[token\])[^\s\"'?#]+"),
]
_MASK = "[redacted]"

# What a value a client chose may not carry into a line (issue 53): C0 controls (a newline
# would forge a second line, ESC reaches the terminal that shows the log, NUL makes the file
# binary), DEL, C1 controls (NEL ends a line for some readers), the Unicode line and paragraph
# separators, and lone surrogates (no encoder writes them).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# The access line's path and method are written as they travel on the wire: everything but
# printable ASCII percent-encoded, so a space cannot fake the line's fields either.
_NOT_WIRE = re.compile(r"[^\x21-\x7e]")


def _percent_encoded(match: re.Match) -> str:
    # surrogatepass: a lone surrogate becomes its three bytes rather than an error.
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "surrogatepass"))


def control_characters_escaped(text: str) -> str:
    """`text` with each control character (and lone surrogate) as its UTF-8 bytes in
    percent-encoding: a newline is `%0A`, ESC `%1B`, NUL `%00`, DEL `%7F`."""
    return _CONTROL.sub(_percent_encoded, text)


def wire_form(text: str) -> str:
    """`text` (a request's method or decoded path) with everything but printable ASCII
    percent-encoded as UTF-8, as a client would have sent it: `/a b`, then a newline, is
    `/a%20b%0A`."""
    return _NOT_WIRE.sub(_percent_encoded, text)


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + _MASK, text)
        else:
            text = pattern.sub(_MASK, text)
    return text


class ControlCharactersFilter(logging.Filter):
    """Escapes control characters in the values a record interpolates (its `args`), wherever
    they came from: a path in Django's "Internal Server Error: <path>", a header a library
    logs. The message's own text is the code's, and stays as written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_escaped(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _escaped(value) for key, value in record.args.items()}
        return True


def _escaped(value):
    return control_characters_escaped(value) if isinstance(value, str) else value


class RedactSecretsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class RequestIdFilter(logging.Filter):
    """Puts the id of the request being served (core.requestid, "-" outside one) on every
    record, as `request_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = requestid.current.get()
        return True


class JsonFormatter(pythonjsonlogger.json.JsonFormatter):
    """`LOG_FORMAT=json`: one JSON object per line, `{"ts", "level", "logger", "request_id",
    "message"}` plus `exc_info` for an exception, whose traceback is scrubbed like a message
    (the formatter formats it again from exc_info, past the filter's cleaned exc_text)."""

    def __init__(self, **kwargs):
        super().__init__(
            "{asctime}{levelname}{name}{request_id}{message}",
            style="{",
            rename_fields={"asctime": "ts", "levelname": "level", "name": "logger"},
            **kwargs,
        )

    def formatException(self, ei) -> str:  # noqa: N802 - logging's name
        return redact(super().formatException(ei))
