"""Who called whom: the dialled number and the caller, as E.164, from an INVITE's
Request-URI and From, however the trunk writes them."""

from __future__ import annotations

import phonenumbers
from django.conf import settings

from core.phone import e164_possible, e164_valid
from history.models import ANONYMOUS_CALLER
from telephony.sip.message import uri_of, user_of

ANONYMOUS_USERS = {"", "anonymous", "restricted", "unavailable", "unknown", "private"}


def _phone_user(uri: str) -> str:
    """The user part of a sip: or tel: URI, without user parameters or visual separators."""
    user = uri[4:] if uri.lower().startswith("tel:") else user_of(uri)
    user = user.split(";", 1)[0]
    return "".join(ch for ch in user if ch not in " -.()").replace("%20", "")


def _as_e164(user: str, check) -> str | None:
    """`user` as E.164 under `check` (e164_valid or e164_possible): written with `+`, with
    00, without any prefix, or in national form for SIP_NATIONAL_REGION."""
    if not user or len(user) > 32:
        return None
    if user.startswith("+"):
        return check(user)
    if user.startswith("00"):
        return check("+" + user[2:])
    found = check("+" + user)
    if found is None:
        try:
            parsed = phonenumbers.parse(user, settings.SIP_NATIONAL_REGION)
        except phonenumbers.NumberParseException:
            return None
        found = check(phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164))
    return found


def dialled_number(request_uri: str) -> str | None:
    """The number a trunk's INVITE is for, as E.164, from its Request-URI."""
    return _as_e164(_phone_user(request_uri), e164_valid)


def caller_number(from_header: str) -> str:
    """The caller as E.164, or ANONYMOUS_CALLER for a withheld or unreadable caller ID."""
    user = _phone_user(uri_of(from_header or ""))
    if user.lower() in ANONYMOUS_USERS:
        return ANONYMOUS_CALLER
    return _as_e164(user, e164_possible) or ANONYMOUS_CALLER
