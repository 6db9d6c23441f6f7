"""Log records: no secret in any line, the request's id on every line, and JSON lines on
`LOG_FORMAT=json`.

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
    re.compile(r"(/(?:verify-email|password-reset)/)(?!\[token\])[^\s\"'?#]+"),
]
_MASK = "[redacted]"


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + _MASK, text)
        else:
            text = pattern.sub(_MASK, text)
    return text


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
