"""The typed readers: the one way Relay's settings read an environment variable.

Each reader reads one variable through django-environ, checks it and returns it typed. A value
it cannot take stops start-up with ImproperlyConfigured in one line that names the variable
(manage.py prints it as "Relay cannot start: ..."); a message never repeats a value that may
be a secret. Each reader also records the name it read in READ, which
tests/relay/test_settings_table.py holds equal to README.md's table of variables, so a
variable cannot be read without being documented, nor documented without being read. The
sections therefore read every variable unconditionally, even one only some configurations
use (DATABASE_POOL_SIZE on SQLite).

A rule between two or more variables (SIP_SRTP needs SIP_TRANSPORT=tls) is a `must` after
their reads.
"""

import json
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import environ
from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")

# Every variable a reader has read, by name.
READ: set[str] = set()

_env = environ.Env()

# environ.Env.bool() reads any unknown word as False; a typo such as DEBUG=ture would then
# silently switch a setting off. `boolean` fails at start-up instead.
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

# A rate limit, as core.ratelimit.Rate parses it: "<count>/<s|m|h>", the count at least 1.
_RATE = re.compile(r"(?P<count>[0-9]+)/[smh]")


def must(condition: object, message: str) -> None:
    """Stop start-up with `message` (one line, naming the variables) unless `condition`."""
    if not condition:
        raise ImproperlyConfigured(message)


def _read(name: str, default: str) -> str:
    READ.add(name)
    return _env.str(name, default=default)


def _alternatives(values: Iterable[str]) -> str:
    *others, last = list(values)
    return f"{', '.join(others)} or {last}" if others else last


def text(name: str, default: str = "") -> str:
    """Any text, as given."""
    return _read(name, default)


def path(name: str, default: Path) -> Path:
    """A path, as given (relative to the working directory)."""
    return Path(_read(name, str(default)))


def readable_file(name: str) -> str:
    """The name of a file that exists, or "" (unset)."""
    value = _read(name, "")
    must(not value or Path(value).is_file(), f"{name} names no readable file: {value!r}")
    return value


def words(name: str, default: Iterable[str] = ()) -> list[str]:
    """A comma-separated list, as django-environ splits it (empty items dropped)."""
    READ.add(name)
    return _env.list(name, default=list(default))


def boolean(name: str, default: bool) -> bool:
    """true/false, 1/0, yes/no or on/off, in any case; any other word stops start-up."""
    raw = _read(name, "true" if default else "false")
    word = raw.strip().lower()
    must(word in _TRUE or word in _FALSE, f"{name} must be true or false, not {raw!r}")
    return word in _TRUE


def choice(
    name: str,
    default: str,
    choices: Iterable[str],
    *,
    lower: bool = False,
    described: str = "",
) -> str:
    """One of `choices` (compared lower-cased with `lower`); the message lists them, or says
    `described` instead of a long list."""
    choices = tuple(choices)
    value = _read(name, default)
    value = value.lower() if lower else value
    must(
        value in choices,
        f"{name} must be {described or _alternatives(choices)}, not {value!r}",
    )
    return value


def whole_number(
    name: str,
    default: int | None,
    *,
    minimum: int = 1,
    maximum: int,
    unit: str = "",
    or_unlimited: bool = False,
) -> int | None:
    """A whole number within [minimum, maximum] (digits only: not 19MiB, 1e3 or -1). With
    `or_unlimited`, also `unlimited`, read as None, which a default of None means too."""
    raw = _read(name, "" if default is None else str(default)).strip()
    if or_unlimited and (raw.lower() == "unlimited" or (default is None and not raw)):
        return None
    also = " (or unlimited)" if or_unlimited else ""
    must(
        raw.isascii() and raw.isdigit() and minimum <= int(raw) <= maximum,
        f"{name} must be a whole number from {minimum} to {maximum}{unit}{also}, not {raw!r}",
    )
    return int(raw)


def number(
    name: str,
    default: float,
    *,
    minimum: float = 0.0,
    maximum: float = math.inf,
    above: bool = False,
    what: str = "a number",
) -> float:
    """A finite decimal number at least `minimum` (more than it, with `above`) and at most
    `maximum`."""
    raw = _read(name, str(default)).strip()
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    bounded = maximum < math.inf
    if above:
        bounds = f"more than {minimum:g}" + (f" and at most {maximum:g}" if bounded else "")
    else:
        bounds = f"from {minimum:g} to {maximum:g}" if bounded else f"{minimum:g} or more"
    must(
        math.isfinite(value)
        and (value > minimum if above else value >= minimum)
        and value <= maximum,
        f"{name} must be {what} {bounds}, not {raw!r}",
    )
    return value


def seconds(name: str, default: float, *, above: bool = False, maximum: float = math.inf) -> float:
    """A duration in seconds, decimals allowed: 0 or more (more than 0, with `above`)."""
    return number(name, default, above=above, maximum=maximum, what="seconds")


def rate(name: str, default: str) -> str:
    """A rate limit, `<count>/<s|m|h>` (30/m), kept as text for core.ratelimit."""
    value = _read(name, default)
    match = _RATE.fullmatch(value)
    must(
        match and int(match["count"]) >= 1,
        f"{name} must be a rate like 30/m (a count per s, m or h), not {value!r}",
    )
    return value


def url(name: str, default: str = "", *, schemes: tuple[str, ...]) -> str:
    """An absolute URL of one of `schemes` with a host, or "" (unset)."""
    value = _read(name, default)
    pattern = rf"^(?:{'|'.join(map(re.escape, schemes))})://[^/\s]+"
    must(
        not value or re.match(pattern, value),
        f"{name} must be an {_alternatives(schemes)} URL, not {value!r}",
    )
    return value


def parsed(name: str, default: str, parse: Callable[[str], T], *, expected: str) -> T:
    """`parse` of the value, which raises ValueError for one it cannot take; the message then
    says the value must be `expected`."""
    value = _read(name, default)
    try:
        return parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {expected}, not {value!r}") from None


def each_parsed(name: str, parse: Callable[[str], T], *, expected: str) -> list[T]:
    """A comma-separated list, each item `parse`d; the message names the item it could not
    take, saying the variable must list `expected`. Unset: []."""
    values = []
    for item in words(name):
        try:
            values.append(parse(item))
        except ValueError:
            raise ImproperlyConfigured(f"{name} must list {expected}, not {item!r}") from None
    return values


def database_config(url: str) -> dict:
    """Django's DATABASES entry for a database URL (postgres://..., sqlite:///...), as
    django-environ parses it; reads no variable itself."""
    return environ.Env.db_url_config(url)


def json_object(name: str, default: dict) -> dict:
    """A JSON object (its text is never repeated: it may hold credentials)."""
    raw = _read(name, "")
    try:
        value = json.loads(raw) if raw else default
    except ValueError:
        value = None
    must(isinstance(value, dict), f"{name} must be a JSON object")
    return value
