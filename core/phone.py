"""Phone numbers in E.164, parsed and checked with phonenumbers; lists of country codes."""

from collections.abc import Iterable

import phonenumbers

E164_MAX_INPUT = 32
ANY_COUNTRY = "*"


def parse_country_codes(text: str) -> list[str]:
    """`GB, us ,FR` as ["GB", "US", "FR"]: comma-separated, trimmed, upper-cased, no blanks."""
    return [code.strip().upper() for code in text.split(",") if code.strip()]


def country_codes_problem(codes: Iterable[str]) -> str | None:
    """What is wrong with a list of ISO 3166 codes (DIAL_ALLOWED_COUNTRIES, a user's extra
    countries), or None."""
    for code in codes:
        if code != ANY_COUNTRY and code not in phonenumbers.SUPPORTED_REGIONS:
            return f"{code!r} is not a country code like GB, US or FR (or * for all)"
    return None


# E.164 (ITU-T) caps a number at 15 digits, country code included. The floor is the one the
# OpenAPI schema publishes (core.fields.E164_PATTERN): the shortest numbers in use, such as
# Niue's (+683 and 4 digits), have 7.
E164_MIN_DIGITS = 7
E164_MAX_DIGITS = 15
# What people put between groups of digits to read them (+44 20 7946 0123, +1 (202) 555-0123).
# Nothing else is taken: a letter is a vanity number or an extension, which phonenumbers would
# quietly turn into digits or drop, so the number dialled would not be the one typed.
READING_SEPARATORS = frozenset(" -./()")
ASCII_DIGITS = frozenset("0123456789")

# The two reasons a number is refused, the same for every field and command that takes one,
# so a person learns which of the two to fix. The form's example is one every such field
# accepts: a fictional number (Ofcom's Leeds drama range), valid, in the default home country,
# and outside the inventory `make run` provisions (which forwarding refuses).
E164_FORM_PROBLEM = (
    "Must be a phone number in E.164 form: + and the country code, then the number, "
    f"{E164_MIN_DIGITS} to {E164_MAX_DIGITS} digits in all, like +441134960123."
)
E164_UNASSIGNED_PROBLEM = "No phone has this number; it is in E.164 form, but in no range in use."


def e164_digits(raw) -> str | None:
    """`raw` as `+` and its digits when it is written in E.164 form, else None.

    E.164 form is a `+`, then 7 to 15 digits of which the first (the country code's) is not 0,
    grouped for reading with READING_SEPARATORS if the writer likes; whitespace around it is
    ignored. Whether the digits make a number in use is not asked here.
    """
    if not isinstance(raw, str) or len(raw) > E164_MAX_INPUT:
        return None
    text = raw.strip()
    if not text.startswith("+"):
        return None
    digits = []
    for ch in text[1:]:
        if ch in ASCII_DIGITS:
            digits.append(ch)
        elif ch not in READING_SEPARATORS:
            return None
    if not E164_MIN_DIGITS <= len(digits) <= E164_MAX_DIGITS or digits[0] == "0":
        return None
    return "+" + "".join(digits)


def _parse(raw) -> phonenumbers.PhoneNumber | None:
    """phonenumbers' reading of `raw`'s digits, or None when `raw` is not in E.164 form or its
    country code is none in use (+999). A national prefix written after the country code
    (+44 (0)20 7946 0123) is dropped, as phonenumbers drops it."""
    digits = e164_digits(raw)
    if digits is None:
        return None
    try:
        return phonenumbers.parse(digits, None)
    except phonenumbers.NumberParseException:
        return None


def _format(parsed: phonenumbers.PhoneNumber) -> str:
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def e164_valid(raw) -> str | None:
    """`raw` as E.164 if it is in E.164 form (e164_digits) and a valid number, of a range in
    use (phonenumbers' `is_valid_number`).

    Used for numbers we dial or hand out.
    """
    parsed = _parse(raw)
    if parsed is None or not phonenumbers.is_valid_number(parsed):
        return None
    return _format(parsed)


def e164_possible(raw) -> str | None:
    """`raw` as E.164 if it is in E.164 form (e164_digits) and a possible number: of a length
    its country's numbers have.

    Used for callers: the network presents whatever caller ID it has, including numbers from
    ranges phonenumbers does not list as assigned (Ofcom's drama range +44 7700 900xxx).
    """
    parsed = _parse(raw)
    if parsed is None or not phonenumbers.is_possible_number(parsed):
        return None
    return _format(parsed)


def e164_problem(raw, *, assigned: bool) -> str | None:
    """Why e164_valid (`assigned`) or e164_possible refuses `raw`, as a sentence for people:
    E164_FORM_PROBLEM when it is not in E.164 form at all, else E164_UNASSIGNED_PROBLEM (in
    E.164 form, but no range in use holds it). None when it is accepted."""
    if e164_digits(raw) is None:
        return E164_FORM_PROBLEM
    accepted = e164_valid(raw) if assigned else e164_possible(raw)
    return None if accepted else E164_UNASSIGNED_PROBLEM
