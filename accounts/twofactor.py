"""The second factor: TOTP codes (RFC 6238) from an authenticator app, and single-use
recovery codes.

A user starts enrolment (a fresh secret, its `otpauth://` URI and QR code), confirms it with a
right code (the factor is on from then, and ten recovery codes are given out once), and turns
it off with the password and a code; staff may reset it. Once it is on, login asks for a code
after the password is found right (accounts.services.user_login).

No secret, code or recovery code is ever logged: the lines here name the user's id only.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from uuid import UUID

import pyotp
import segno
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import apikeys
from accounts.errors import PasswordMismatch, password_typed_again_check
from accounts.models import LoginSession, RecoveryCode, TotpDevice, User
from accounts.sessions import sessions_end_all
from core import ratelimit
from core.errors import ApplicationError, ErrorCode
from core.passwords import password_hashing_slot
from mail.services import mail_queue

logger = logging.getLogger(__name__)

# RFC 6238 §4.1: "X represents the time step in seconds (default value X = 30 seconds)";
# §5.2: "We RECOMMEND a default time-step size of 30 seconds." Authenticator apps assume it,
# with 6 digits and HMAC-SHA1 (the otpauth:// URI's defaults), so Relay uses exactly those.
STEP_SECONDS = 30
DIGITS = 6
# RFC 6238 §5.2: "We RECOMMEND that at most one time step is allowed as the network delay."
# One step either side of now: the code being typed as the step turns, and a phone's clock
# up to 30 seconds off.
STEPS_ALLOWED = (-1, 0, 1)
# RFC 4226 §4 R6: "The length of the shared secret MUST be at least 128 bits. This document
# RECOMMENDs a shared secret length of 160 bits." 32 base32 characters are 160 bits.
SECRET_BASE32_CHARS = 32

RECOVERY_CODE_COUNT = 10
RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i to misread
RECOVERY_CODE_CHARS = 16  # 16 of 31 characters: 79 bits, shown as four groups of four
OTP_FAILURES_SCOPE = "otp:user"
TOTP_CODE = re.compile(rf"[0-9]{{{DIGITS}}}")


class OtpRequired(ApplicationError):
    """`user` is the one whose password was right, for a caller that asks for the code on a
    page of its own (the console); the API's answer says nothing of it."""

    code = ErrorCode.OTP_REQUIRED
    message = "This account has a second factor: send the code of your authenticator app."

    def __init__(self, *, user: User | None = None) -> None:
        super().__init__()
        self.user = user


class OtpInvalid(ApplicationError):
    code = ErrorCode.OTP_INVALID
    message = "The code is wrong or already used."


class TwoFactorOn(ApplicationError):
    code = ErrorCode.TWO_FACTOR_ON
    message = "A second factor is already on: turn it off first."


class TwoFactorOff(ApplicationError):
    code = ErrorCode.TWO_FACTOR_OFF
    message = "No second factor is on."


@dataclass(frozen=True)
class PendingLogin:
    """A login whose password was right and whose code is still to come, kept in the
    browser's Django session under `key` for `seconds`: the user's id, until when the code
    page takes it, and where to go next; never the password. The console's and the admin's
    code pages each keep their own, for the users `allowed` to finish there."""

    key: str
    seconds: int
    allowed: Callable[[User], bool]

    def remember(self, request, user: User, *, next_url: str) -> None:
        """Remember that `user` gave the right password, under a new session key (as a
        sign-in is)."""
        request.session.cycle_key()
        request.session[self.key] = {
            "user": str(user.pk),
            "until": timezone.now().timestamp() + self.seconds,
            "next": next_url,
        }

    def take(self, request) -> tuple[User, str] | None:
        """The user whose code the page waits for, and where to go next; None when no login
        waits, or it waited too long, or the user is no longer allowed (then it is
        forgotten)."""
        pending = request.session.get(self.key)
        if not isinstance(pending, dict):
            return None
        user = None
        if timezone.now().timestamp() <= pending.get("until", 0):
            try:
                user = User.objects.filter(pk=UUID(pending["user"])).first()
            except (KeyError, ValueError, TypeError):
                user = None
        if user is None or not self.allowed(user):
            self.forget(request)
            return None
        return user, pending.get("next") or ""

    def forget(self, request) -> None:
        request.session.pop(self.key, None)


@dataclass(frozen=True)
class Enrolment:
    """What an authenticator app needs: the secret, as a URI and as its QR code (SVG)."""

    secret: str
    otpauth_uri: str
    qr_svg: str


def enrolment(*, user: User, secret: str) -> Enrolment:
    """The secret of `user`'s factor as text, an `otpauth://` URI (issuer TOTP_ISSUER, the
    account named by its e-mail) and that URI's QR code, a standalone SVG document that can
    also be put inline in HTML (no XML declaration, no script, no style)."""
    uri = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=user.email, issuer_name=settings.TOTP_ISSUER
    )
    buffer = io.BytesIO()
    segno.make(uri, error="m").save(
        buffer,
        kind="svg",
        xmldecl=False,
        scale=4,
        light="#fff",  # a dark page must not swallow the quiet zone
        title="QR code of the second factor's secret",
        nl=False,
    )
    return Enrolment(secret=secret, otpauth_uri=uri, qr_svg=buffer.getvalue().decode())


def two_factor_start(*, user: User, password: str) -> Enrolment:
    """Begin enrolment, with the account's password (PasswordMismatch, 403; the caller counts
    the attempt toward the login rate limits first): a token alone, stolen, must not be able
    to bind the thief's authenticator to the account. A fresh random secret, stored
    encrypted and pending (the factor is not on until two_factor_confirm). A second start
    before confirming replaces the pending secret. TwoFactorOn (409) while a confirmed factor
    is on. Concurrent starts of one user are serialised on the user's row, so a user never
    has two devices. PasswordHashingBusy (503) when every hashing slot is taken."""
    password_typed_again_check(user=user, password=password)
    secret = pyotp.random_base32(length=SECRET_BASE32_CHARS)
    with transaction.atomic():
        User.objects.select_for_update(no_key=True).get(pk=user.pk)
        device = TotpDevice.objects.filter(user=user).first()
        if device is not None and device.confirmed_at is not None:
            raise TwoFactorOn()
        if device is None:
            device = TotpDevice(user=user)
        device.secret_ciphertext = apikeys.encrypt(secret)
        device.created_at = timezone.now()
        device.last_used_step = 0
        device.save()
    return enrolment(user=user, secret=secret)


def two_factor_confirm(*, user: User, code: str, keep: LoginSession | None) -> list[str]:
    """Turn the pending factor on with a right TOTP code of its secret; answers the ten
    recovery codes, in clear this once (only their digests are kept). Every session of the
    account but `keep` (the caller's; None with an API key) ends in the same transaction,
    its JWTs refused and its sockets closed (4401), as a password change ends them: whoever
    else held a session must now pass the new factor. TwoFactorOff (409) when no enrolment
    was started, TwoFactorOn (409) when the factor is already on, OtpInvalid (401) for a
    wrong code, which counts toward RATE_LIMIT_OTP_PER_USER (RateLimited, 429, past it, even
    for a right code)."""
    failures_check(user=user)
    with transaction.atomic():
        device = TotpDevice.objects.select_for_update().filter(user=user).first()
        if device is None:
            raise TwoFactorOff("Start turning the second factor on first.")
        if device.confirmed_at is not None:
            raise TwoFactorOn()
        step = _totp_step(device=device, code=code)
        confirmed = step is not None
        if confirmed:
            device.confirmed_at = timezone.now()
            device.last_used_step = step
            device.save(update_fields=["confirmed_at", "last_used_step"])
            codes = _recovery_codes_issue(device=device)
            sessions_end_all(user=user, keep=keep)
            _mail(user=user, template="two_factor_on", at=device.confirmed_at)
    if not confirmed:
        _failed(user=user, error=OtpInvalid())
    logger.info("second factor turned on for user %s", user.pk)
    return codes


def two_factor_disable(*, user: User, password: str, code: str) -> None:
    """Turn the factor off, with the password and a code (a TOTP code or an unused recovery
    code): the secret and the recovery codes are deleted. TwoFactorOff (409) when no factor
    is on; a wrong password (password_mismatch, 403) or code (OtpInvalid, 401) counts
    toward RATE_LIMIT_OTP_PER_USER (429 past it); PasswordHashingBusy (503) when every
    hashing slot is taken (nothing is checked or counted then). A pending enrolment is not a
    factor: starting again replaces it."""
    device = _confirmed_device(user=user)
    if device is None:
        raise TwoFactorOff()
    failures_check(user=user)
    with password_hashing_slot():
        password_right = user.check_password(password)
    if not password_right:
        _failed(user=user, error=PasswordMismatch())
    if not _code_accepted(device=device, code=code):
        _failed(user=user, error=OtpInvalid())
    with transaction.atomic():
        if TotpDevice.objects.filter(pk=device.pk).delete()[0]:
            _mail(user=user, template="two_factor_off", at=timezone.now())
    logger.info("second factor turned off for user %s", user.pk)


def two_factor_reset(*, user: User, staff: User | None = None) -> bool:
    """Staff's reset: delete the user's factor, on or pending, with its recovery codes, so
    the password alone logs in again. Whether there was one."""
    with transaction.atomic():
        confirmed = TotpDevice.objects.filter(user=user, confirmed_at__isnull=False).exists()
        deleted, _ = TotpDevice.objects.filter(user=user).delete()
        if confirmed:  # a pending enrolment was never on: nothing to tell
            _mail(user=user, template="two_factor_off", at=timezone.now(), by_staff=True)
    if deleted:
        logger.warning(
            "second factor of user %s reset by staff %s", user.pk, getattr(staff, "pk", None)
        )
    return bool(deleted)


def otp_check(*, user: User, otp: str | None) -> None:
    """The second step of a login whose password was right: nothing to do for a user without
    a confirmed factor; otherwise OtpRequired (401) without `otp`, and OtpInvalid (401) unless
    `otp` is a TOTP code of a step not used before or an unused recovery code, which it then
    spends. Wrong codes count toward RATE_LIMIT_OTP_PER_USER (RateLimited, 429, past it)."""
    device = _confirmed_device(user=user)
    if device is None:
        return
    if not otp:
        raise OtpRequired(user=user)
    failures_check(user=user)
    if not _code_accepted(device=device, code=otp):
        _failed(user=user, error=OtpInvalid())


def _mail(*, user: User, template: str, at, by_staff: bool = False) -> None:
    """Tell the user their factor went on or off, in the caller's transaction (the outbox)."""
    mail_queue(
        to=user.email,
        template=template,
        context={
            "email": user.email,
            "changed_at": at.astimezone(UTC).strftime("%d %B %Y, %H:%M"),
            "by_staff": by_staff,
        },
    )


# --- checking codes ---------------------------------------------------------------------------
def failures_check(*, user: User) -> None:
    """RateLimited (429) once the user's wrong codes reached RATE_LIMIT_OTP_PER_USER in this
    window: then even a right code is refused, so guessing learns nothing."""
    ratelimit.check(OTP_FAILURES_SCOPE, str(user.pk), settings.RATE_LIMIT_OTP_PER_USER)


def _failed(*, user: User, error: ApplicationError) -> None:
    """Count one wrong code (or password) of `user`, then raise `error`, or RateLimited when
    this failure was the last one allowed in the window."""
    logger.info("wrong second-factor credential for user %s", user.pk)
    ratelimit.hit(OTP_FAILURES_SCOPE, str(user.pk), settings.RATE_LIMIT_OTP_PER_USER)
    raise error


def _confirmed_device(*, user: User) -> TotpDevice | None:
    return TotpDevice.objects.filter(user=user, confirmed_at__isnull=False).first()


def _totp_step(*, device: TotpDevice, code: str) -> int | None:
    """The time step whose code `code` is, among those allowed around now and after the last
    one used; None when there is none. Every allowed step is compared, in constant time."""
    code = code.strip().replace(" ", "")
    secret = apikeys.decrypt(device.secret_ciphertext)
    if secret is None or not TOTP_CODE.fullmatch(code):
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    now_step = int(timezone.now().timestamp()) // STEP_SECONDS
    matched = None
    for offset in STEPS_ALLOWED:
        step = now_step + offset
        # RFC 6238 §5.2: "the verifier MUST NOT accept the second attempt of the OTP after
        # the successful validation has been issued for the first OTP": a step at or before
        # the last one used is never accepted again.
        if hmac.compare_digest(totp.generate_otp(step), code) and step > device.last_used_step:
            matched = step
    return matched


def _code_accepted(*, device: TotpDevice, code: str) -> bool:
    """Spend `code`, a TOTP code (six digits) or a recovery code, if it is good: each spends
    in one conditional UPDATE, so two requests racing with the same code cannot both win."""
    step = _totp_step(device=device, code=code)
    if step is not None:
        return bool(
            TotpDevice.objects.filter(pk=device.pk, last_used_step__lt=step).update(
                last_used_step=step
            )
        )
    normalized = recovery_code_normalize(code)
    if normalized is None:
        return False
    return bool(
        RecoveryCode.objects.filter(
            device=device, digest=_digest(normalized), used_at__isnull=True
        ).update(used_at=timezone.now())
    )


# --- recovery codes ---------------------------------------------------------------------------
def recovery_code_normalize(code: str) -> str | None:
    """`code` as it was issued (lower case, no dashes or spaces), or None when it cannot be
    one: people type them in either case and with or without the dashes shown."""
    plain = re.sub(r"[\s-]", "", code).lower()
    if len(plain) != RECOVERY_CODE_CHARS or not set(plain) <= set(RECOVERY_ALPHABET):
        return None
    return plain


def _digest(normalized: str) -> str:
    return hashlib.sha256(normalized.encode()).hexdigest()


def _recovery_codes_issue(*, device: TotpDevice) -> list[str]:
    """Ten fresh codes for `device`, replacing any it had; the codes in clear, grouped
    xxxx-xxxx-xxxx-xxxx, for the user to keep."""
    plain = [
        "".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(RECOVERY_CODE_CHARS))
        for _ in range(RECOVERY_CODE_COUNT)
    ]
    RecoveryCode.objects.filter(device=device).delete()
    RecoveryCode.objects.bulk_create(
        RecoveryCode(device=device, digest=_digest(code)) for code in plain
    )
    return ["-".join(code[i : i + 4] for i in range(0, RECOVERY_CODE_CHARS, 4)) for code in plain]
