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


def _parse(raw) -> phonenumbers.PhoneNumber | None:
    if not isinstance(raw, str) or not raw.startswith("+") or len(raw) > E164_MAX_INPUT:
        return None
    try:
        return phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        return None


def _format(parsed: phonenumbers.PhoneNumber) -> str:
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def e164_valid(raw) -> str | None:
    """`raw` as E.164 if it is a valid, assigned-range number written with its + prefix.

    Used for numbers we dial or hand out.
    """
    parsed = _parse(raw)
    if parsed is None or not phonenumbers.is_valid_number(parsed):
        return None
    return _format(parsed)


def e164_possible(raw) -> str | None:
    """`raw` as E.164 if it is a well-formed, possible number with its + prefix.

    Used for callers: the network presents whatever caller ID it has, including numbers from
    ranges phonenumbers does not list as assigned (Ofcom's drama range +44 7700 900xxx).
    """
    parsed = _parse(raw)
    if parsed is None or not phonenumbers.is_possible_number(parsed):
        return None
    formatted = _format(parsed)
    # Reject what phonenumbers quietly repairs (letters, stray punctuation, extensions).
    digits = "+" + "".join(ch for ch in raw if ch.isdigit())
    if formatted != digits or parsed.extension:
        return None
    return formatted
