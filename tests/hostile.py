"""Hypothesis strategies for hostile clients: JSON text, query strings and frames that a careless
or malicious client sends, and the checks every answer to them must pass.

Documents are built as text, never with json.dumps of the whole: json.dumps cannot write
30,000 levels of nesting (RecursionError) or a 5,000-digit integer (ValueError), and a real
client can send both. Strings are escaped with json.dumps, which writes a lone surrogate as
the `\\ud800` escape, exactly the form that used to reach the database.

Valid values may hold placeholders that a test fills per example (`fill`): `__UNIQUE__` (a
fresh id, so that idempotent calls do not all collapse into the first) and `__CAPTCHA__` (a
live CAPTCHA token, so that creation paths are reached, not only the token check).
"""

from __future__ import annotations

import itertools
import json
import re
from urllib.parse import quote

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Repeatable runs: the same examples every time, nothing stored between runs. Examples are
# few and cheap (Django's test client or an in-memory WebSocket), so each test stays within
# a few seconds.
FUZZ = settings(
    max_examples=80,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # fixtures (a user, a number) are shared on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

# Characters that broke Relay once or break parsers, databases and terminals elsewhere: NUL,
# other C0/C1 controls, lone surrogates (high and low), bidi overrides and marks, line and
# paragraph separators, BOM, non-characters, astral characters, JSON's own metacharacters.
HOSTILE_CHARACTERS = [
    "\x00",
    "\x01",
    "\x08",
    "\x1b",
    "\x7f",
    "\x85",
    "\x9f",
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
    "\u200e",
    "\u200f",
    "\u202e",
    "\u2066",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\ufffe",
    "\uffff",
    "\U0010ffff",
    "\U0001f600",
    "é",
    "中",
    '"',
    "\\",
    "/",
    " ",
    "\t",
    "\n",
]
hostile_character = st.sampled_from(HOSTILE_CHARACTERS)

hostile_text = st.one_of(
    st.text(alphabet=st.one_of(hostile_character, st.characters()), max_size=40),
    # 1,000-10,000 characters of one kind: long strings, long escapes, long RTL runs.
    st.builds(lambda c, n: c * n, hostile_character | st.just("x"), st.integers(1_000, 10_000)),
    st.sampled_from(["", " ", "\t\n", "null", "+442079460120", "@a:example.org"]),
)


def nested(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


# Depths and digit counts around the limits that matter: Relay's (32 levels, 100 digits),
# Python's (about 1,000 levels of recursion, 4,300 digits) and the 64 KiB body limit.
depths = st.sampled_from([33, 1_000, 5_000, 25_000]) | st.integers(30, 25_000)
digit_counts = st.sampled_from([101, 4_301, 5_000]) | st.integers(90, 6_000)

hostile_json = st.one_of(
    hostile_text.map(json.dumps),
    st.builds(nested, depths, st.sampled_from(["array", "object"])),
    st.builds(lambda n, sign: sign + "9" * n, digit_counts, st.sampled_from(["", "-"])),
    st.sampled_from(
        [
            "null",
            "true",
            "false",
            "0",
            "-1",
            "1.5",
            "1e999",
            "-0",
            "NaN",
            "Infinity",
            "[]",
            "{}",
            '["x"]',
            '{"a": "b"}',
            '""',
            "1" * 400 + ".5",
        ]
    ),
)

garbage_document = st.one_of(
    hostile_json,
    st.sampled_from(["", "{", '{"a": 1', "[1, 2,]", "{'a': 1}", "\ufeff{}", "{}{}"]),
    # A raw (unescaped) lone surrogate: sent as its bytes (ED A0 80), which are not UTF-8.
    st.sampled_from(['{"email": "\ud800"}', '"\udfff"']),
)


def json_object(members: dict[str, str]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in members.items()) + "}"


@st.composite
def documents(draw, valid: dict[str, str]) -> str:
    """A JSON object with the fields of `valid` (name -> valid JSON text), some of them hostile,
    some missing, maybe with hostile extra keys; or now and then no object at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(garbage_document)
    members = {}
    for name, good in valid.items():
        choice = draw(st.sampled_from(["valid", "hostile", "hostile", "missing"]))
        if choice == "valid":
            members[name] = good
        elif choice == "hostile":
            members[name] = draw(hostile_json)
    members.update(draw(st.dictionaries(hostile_text, hostile_json, max_size=2)))
    return json_object(members)


def query_string(params: dict[str, str]) -> str:
    """Percent-encode as a client would, lone surrogates included (as their UTF-8 bytes)."""
    return "&".join(
        f"{quote(k.encode('utf-8', 'surrogatepass'))}={quote(v.encode('utf-8', 'surrogatepass'))}"
        for k, v in params.items()
    )


def path_segment(value: str) -> str:
    """`value` percent-encoded as one path segment (slashes too), surrogates as UTF-8 bytes."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


# Integers as query strings: around 64 bits (SQL OFFSET) and past Python's 4,300 digits.
long_digits = st.builds(
    lambda n: "9" * n, st.sampled_from([18, 19, 20, 4_301, 5_000]) | digit_counts
)
hostile_query_value = st.one_of(
    hostile_text,
    long_digits,
    st.sampled_from(["-1", "0", "1", "200", "201", "1e3", "0x10", "٣", "answered", "all"]),
)


@st.composite
def query_params(draw, names: list[str]) -> dict[str, str]:
    """Each documented parameter absent, hostile or a very long integer, plus maybe hostile
    extra parameters."""
    params = {}
    for name in names:
        choice = draw(st.sampled_from(["absent", "hostile", "digits"]))
        if choice != "absent":
            params[name] = draw(hostile_query_value if choice == "hostile" else long_digits)
    params.update(draw(st.dictionaries(hostile_text, hostile_query_value, max_size=2)))
    return params


_unique = itertools.count()


def fill(text: str, *, captcha_token=None) -> str:
    """The document with its placeholders replaced for this example."""
    while "__UNIQUE__" in text:
        text = text.replace("__UNIQUE__", f"u{next(_unique)}", 1)
    if "__CAPTCHA__" in text and captcha_token is not None:
        text = text.replace("__CAPTCHA__", captcha_token())
    return text


ERROR_CODE = re.compile(r"[a-z][a-z_]*")


def assert_error_shape(body, *, frame: bool = False) -> None:
    """The documented error: {"error", "code", "fields"?} (a frame adds "type" and "callId"?)."""
    assert isinstance(body, dict), body
    allowed = {"error", "code", "fields"} | ({"type", "callId"} if frame else set())
    assert set(body) <= allowed, body
    assert isinstance(body["error"], str) and body["error"], body
    assert isinstance(body["code"], str) and ERROR_CODE.fullmatch(body["code"]), body
    if frame:
        assert body["type"] == "error"
        assert isinstance(body.get("callId", ""), str)
    if "fields" in body:
        fields = body["fields"]
        assert isinstance(fields, dict) and fields, body
        for name, messages in fields.items():
            assert isinstance(name, str), body
            assert isinstance(messages, list) and messages, body
            assert all(isinstance(m, str) and m for m in messages), body
