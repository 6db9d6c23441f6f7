"""Who may call what (docs/operations.md: Fraud): the countries dialed, the plans and their
quotas, sign-up, and when a user is flagged for staff (core/dialing.py, accounts/quotas.py)."""

import re

from core.phone import country_codes_problem, parse_country_codes
from relay.settings.readers import boolean, must, rate, text, whole_number, words
from relay.settings.telephony import SIP_NATIONAL_REGION

# The countries Relay dials (ISO 3166 codes, comma-separated; `*`: all); default: the home
# country, SIP_NATIONAL_REGION's. Premium-rate and similar numbers only with DIAL_ALLOW_PREMIUM.
DIAL_ALLOWED_COUNTRIES = parse_country_codes(text("DIAL_ALLOWED_COUNTRIES", SIP_NATIONAL_REGION))
_problem = country_codes_problem(DIAL_ALLOWED_COUNTRIES)
must(not _problem, f"DIAL_ALLOWED_COUNTRIES: {_problem}")
must(DIAL_ALLOWED_COUNTRIES, "DIAL_ALLOWED_COUNTRIES must name a country (or be *)")
DIAL_ALLOW_PREMIUM = boolean("DIAL_ALLOW_PREMIUM", False)

# Whether anyone may register (POST /api/auth/register); when false, staff create users in
# the admin or with `manage.py createuser`.
REGISTRATION_OPEN = boolean("REGISTRATION_OPEN", True)

# A user refused this many times in an hour (destinations and quotas) is flagged for staff.
FRAUD_FLAG_REFUSALS_PER_HOUR = whole_number("FRAUD_FLAG_REFUSALS_PER_HOUR", 20, maximum=10**6)

# Plans: `free` and any others PLANS names. Each plan's limits are PLAN_<NAME>_<LIMIT>; a
# plan other than free takes free's value for a limit it does not set. The quotas (calls and
# answered seconds per rolling day, calls up at once) may also be `unlimited`.
PLAN_DEFAULTS = {
    "numbers": 5,
    "calls_per_day": 50,
    "call_seconds_per_day": 1800,
    "concurrent_calls": 3,
}
PLAN_NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")


def _plans() -> dict[str, dict[str, int | None]]:
    names = [name.strip().lower() for name in words("PLANS", ["free"])]
    for name in names:
        must(
            PLAN_NAME.fullmatch(name),
            f"PLANS must list plan names like free,pro (a-z, 0-9, _), not {name!r}",
        )
    plans: dict[str, dict[str, int | None]] = {}
    for name in ["free", *(n for n in names if n != "free")]:
        base = plans.get("free", PLAN_DEFAULTS)
        plans[name] = {
            key: whole_number(
                f"PLAN_{name.upper()}_{key.upper()}",
                base[key],
                minimum=0,
                maximum=10**9,
                or_unlimited=key != "numbers",
            )
            for key in PLAN_DEFAULTS
        }
    return plans


PLANS = _plans()
PLAN_NUMBER_LIMITS = {name: limits["numbers"] for name, limits in PLANS.items()}
# A number given back (deleted, released by staff, or its holder's account deleted) rests
# this long before anyone may take it again: calls meant for its last holder stop first.
NUMBER_QUARANTINE_HOURS = whole_number(
    "NUMBER_QUARANTINE_HOURS", 30 * 24, minimum=0, maximum=24 * 366, unit=" (hours)"
)

# --- E-mail verification (accounts.verification) ----------------------------------------------
# Sign-up and a change of address mail a link that confirms the address; it works once, for
# EMAIL_VERIFICATION_HOURS. With REQUIRE_EMAIL_VERIFICATION an unverified user may not take a
# number or place a call (403 email_unverified). Verification mails a user may ask for
# (resent, or for a new address): RATE_LIMIT_VERIFICATION_MAIL_PER_USER.
REQUIRE_EMAIL_VERIFICATION = boolean("REQUIRE_EMAIL_VERIFICATION", False)
EMAIL_VERIFICATION_HOURS = whole_number("EMAIL_VERIFICATION_HOURS", 48, maximum=24 * 30)
RATE_LIMIT_VERIFICATION_MAIL_PER_USER = rate("RATE_LIMIT_VERIFICATION_MAIL_PER_USER", "5/h")

# --- Shared numbers (virtual_numbers, issue 57) ------------------------------------------
# Invitations a user may send to share a number (each is a mail to someone else's address).
RATE_LIMIT_INVITATIONS_PER_USER = rate("RATE_LIMIT_INVITATIONS_PER_USER", "20/h")
