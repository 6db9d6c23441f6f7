"""What Relay accepts as JSON and as text, decided once for HTTP bodies and WebSocket frames.

Every JSON document a client sends goes through `loads` (DRF through `JSONParser`, the
WebSocket consumer directly), so both surfaces refuse the same things with the same 400
`invalid_request`, before any view, service or database sees them:

- text that is not UTF-8 (or the body's declared charset);
- arrays and objects nested deeper than MAX_JSON_DEPTH (Python's parser would otherwise run
  out of stack on ~1,000 levels and raise RecursionError);
- integers of more than MAX_INT_DIGITS digits (Python refuses to convert past 4,300 and
  would report the body as "not valid JSON"), and NaN or Infinity (not JSON);
- any string, object keys included, holding NUL or a lone surrogate (`"\\ud800"` is valid
  JSON but cannot be encoded as UTF-8, and PostgreSQL cannot store NUL): refused naming the
  field, like any other bad field.

Identifiers chosen by clients (`callId`) refuse every control character as well; services
check that with `id_problem`, because which strings are identifiers is theirs to know.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import parsers

from core.errors import InvalidRequest

MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 100

_UNACCEPTABLE_TEXT = re.compile("[\x00\ud800-\udfff]")
_STRUCTURE = re.compile(r'["\\\[\]{}]')
TEXT_RULE = "Must not contain NUL characters or unpaired surrogates (\\ud800-\\udfff)."
ID_RULE = "Must not contain control characters."


def text_problem(value: str) -> str | None:
    """Why `value` is not acceptable text (NUL or a lone surrogate), or None if it is."""
    return TEXT_RULE if _UNACCEPTABLE_TEXT.search(value) else None


def id_problem(value: str) -> str | None:
    """Why `value` is not acceptable as an identifier (any control character), or None."""
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
        return ID_RULE
    return None


def printable(value: str) -> str:
    """`value` with unacceptable characters replaced by U+FFFD, safe to echo in an error."""
    return _UNACCEPTABLE_TEXT.sub("\ufffd", value)


class UnacceptableText(InvalidRequest):
    """A well-formed document with unacceptable strings in it. `document` is what was parsed,
    so a caller can still echo its good parts (the consumer echoes a clean callId)."""

    def __init__(self, message: str, *, fields: dict[str, list[str]], document: Any) -> None:
        super().__init__(message, fields=fields)
        self.document = document


class _NumberTooLarge(ValueError):
    pass


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberTooLarge
    return int(digits)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _nested_deeper_than(text: str, limit: int) -> bool:
    """True if arrays/objects in `text` nest deeper than `limit`, brackets inside strings not
    counted. One linear pass, without recursion and without parsing."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string, escaped_at = 0, False, -1
    for match in _STRUCTURE.finditer(text):
        at, char = match.start(), match.group()
        if at == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _text_problems(value: Any, path: str, out: dict[str, list[str]]) -> None:
    """Collect {"field.path": [TEXT_RULE]} for every bad string (value or key) in `value`.
    Depth is already bounded, so this recursion is too."""
    if isinstance(value, str):
        if text_problem(value):
            out.setdefault(path or "non_field_errors", []).append(TEXT_RULE)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{path}.{printable(key)}" if path else printable(key)
            if text_problem(key):
                out.setdefault(name, []).append(TEXT_RULE)
            _text_problems(item, name, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _text_problems(item, f"{path}.{index}" if path else str(index), out)


def loads(raw: str | bytes, *, what: str = "request body", encoding: str = "utf-8") -> Any:
    """Parse one JSON document from a client, or raise InvalidRequest saying what is wrong.

    `what` names the document in messages ("request body", "frame"). Raises UnacceptableText
    (an InvalidRequest naming every bad field) for strings that are not acceptable text.
    """
    if isinstance(raw, bytes | bytearray):
        try:
            text = bytes(raw).decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise InvalidRequest(f"The {what} is not valid {encoding} text.") from exc
    else:
        text = raw
    if _nested_deeper_than(text, MAX_JSON_DEPTH):
        raise InvalidRequest(
            f"The {what} nests arrays and objects deeper than {MAX_JSON_DEPTH} levels."
        )
    try:
        document = json.loads(text, parse_int=_parse_int, parse_constant=_refuse_constant)
    except _NumberTooLarge as exc:
        raise InvalidRequest(
            f"A number in the {what} is too large (more than {MAX_INT_DIGITS} digits)."
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(f"The {what} is not valid JSON.") from exc
    problems: dict[str, list[str]] = {}
    _text_problems(document, "", problems)
    if problems:
        field = next(iter(problems))
        raise UnacceptableText(f"{field}: {TEXT_RULE}", fields=problems, document=document)
    return document


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser (REST_FRAMEWORK's only parser), with `loads`' rules."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        return loads(stream.read(), what="request body", encoding=encoding)
