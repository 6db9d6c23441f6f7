"""The dialing policy: which numbers Relay rings at all, whoever asks.

Every path that dials checks a destination here before anything is written: the socket's
`call`, `POST /api/calls`, Matrix `!call` (all through realtime.services.call_submit,
which `manage.py place_call` reaches over the socket), and forwarding targets. Anyone can
register, so without it one account, or one stolen API key, could pump calls to premium-rate
numbers abroad on the operator's trunk (international revenue-share fraud).

- DIAL_ALLOWED_COUNTRIES: ISO 3166 codes (default: SIP_NATIONAL_REGION's); `*` allows every
  country. Staff may add countries for one user (User.dial_countries). Numbers of no country
  (+800, +808, +870, +881-883, +979: phonenumbers' region "001") are allowed only by `*`.
- Premium-rate, shared-cost, UAN, personal and pager numbers (as phonenumbers classes them)
  are refused unless DIAL_ALLOW_PREMIUM.
"""

from __future__ import annotations

from collections.abc import Iterable

import phonenumbers
from django.conf import settings
from phonenumbers import PhoneNumberType

from core.errors import ApplicationError, ErrorCode
from core.phone import ANY_COUNTRY

NON_GEOGRAPHIC = phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY  # "001"

# phonenumbers' type -> (the metric's reason label, what the refusal calls it).
PREMIUM_TYPES = {
    PhoneNumberType.PREMIUM_RATE: ("premium_rate", "a premium-rate number"),
    PhoneNumberType.SHARED_COST: ("shared_cost", "a shared-cost number"),
    PhoneNumberType.UAN: ("uan", "a universal access number (UAN)"),
    PhoneNumberType.PERSONAL_NUMBER: ("personal_number", "a personal number"),
    PhoneNumberType.PAGER: ("pager", "a pager number"),
}
REFUSAL_REASONS = ("country", *(label for label, _ in PREMIUM_TYPES.values()))


class DestinationNotAllowed(ApplicationError):
    """The policy refuses the number; `reason` is one of REFUSAL_REASONS."""

    code = ErrorCode.DESTINATION_NOT_ALLOWED

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _countries_named(codes: Iterable[str]) -> str:
    codes = sorted(codes)
    return ", ".join(codes) if len(codes) <= 12 else f"{len(codes)} countries"


def destination_check(number: str, *, extra_countries: Iterable[str] = ()) -> None:
    """Refuse `number` (valid E.164, as DialableNumberField returns it) with
    DestinationNotAllowed saying why, or return. `extra_countries` widens
    DIAL_ALLOWED_COUNTRIES for one user."""
    parsed = phonenumbers.parse(number, None)
    allowed = {*settings.DIAL_ALLOWED_COUNTRIES, *extra_countries}
    if ANY_COUNTRY not in allowed:
        region = phonenumbers.region_code_for_number(parsed) or NON_GEOGRAPHIC
        if region not in allowed:
            where = (
                "an international number of no country"
                if region == NON_GEOGRAPHIC
                else f"a number in {region}"
            )
            raise DestinationNotAllowed(
                f"{number} is {where}; this service dials only numbers in "
                f"{_countries_named(allowed)}.",
                reason="country",
            )
    premium = PREMIUM_TYPES.get(phonenumbers.number_type(parsed))
    if premium is not None and not settings.DIAL_ALLOW_PREMIUM:
        label, described = premium
        raise DestinationNotAllowed(
            f"{number} is {described}; this service does not dial premium-rate, shared-cost, "
            "UAN, personal or pager numbers.",
            reason=label,
        )
