"""E-mail addresses confirmed by a mailed link: at sign-up, again on request, and for a change
of address, which takes effect only once the new address is confirmed; and the gate
REQUIRE_EMAIL_VERIFICATION puts on taking a number and placing a call.

A link's token is the user's id (hex), a dot, and EmailVerificationTokenGenerator's token: an
HMAC over the user's id, address, verified flag and pending address, with its timestamp. So
it dies once used (the flag or the address changes), once the address changes some other
way (a newer change asked for, a link of the old address followed), and after
EMAIL_VERIFICATION_HOURS. A link is never logged: the console's route names it `token`, which
the access log writes as `[token]`, and relay.logging redacts it from any other line.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.http import base36_to_int

from accounts.errors import EmailTaken, email_address_checked, password_typed_again_check
from accounts.linktokens import link_token_make, link_token_user
from accounts.models import User
from core import ratelimit
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from mail.services import mail_queue

logger = logging.getLogger(__name__)

VERIFY_PATH = "/verify-email"  # the console's page; the console is served at the root
# The console's "Forgot your password?" page (accounts.credentials), where the notice to the
# old address sends someone whose account is being moved away from them.
RESET_PATH = "/password-reset"
TOKEN_MAX_LENGTH = 100  # 32 hex digits, a dot, Django's token (about 40 characters)


class EmailVerificationTokenGenerator(PasswordResetTokenGenerator):
    """Django's reset-token machinery (a salted HMAC with SECRET_KEY and its fallbacks, a
    timestamp, compared in constant time) with a salt of its own, over what verifying
    changes, and an age limit of EMAIL_VERIFICATION_HOURS instead of PASSWORD_RESET_TIMEOUT."""

    key_salt = "relay.accounts.verification.EmailVerificationTokenGenerator"

    def _make_hash_value(self, user, timestamp) -> str:
        return "|".join(
            (str(user.pk), user.email, str(user.email_verified), user.email_pending, str(timestamp))
        )

    def _now(self):
        # Django's datetime.now() is local time; timezone.now() is UTC (and the tests' clock).
        return timezone.now().replace(tzinfo=None)

    def check_token(self, user, token) -> bool:
        # Django's check_token, with this generator's age limit.
        if not (user and token):
            return False
        timestamp, _, _hash = token.partition("-")
        try:
            issued = base36_to_int(timestamp)
        except ValueError:
            return False
        if not any(
            constant_time_compare(self._make_token_with_timestamp(user, issued, secret), token)
            for secret in (self.secret, *self.secret_fallbacks)
        ):
            return False
        age = self._num_seconds(self._now()) - issued
        return 0 <= age <= settings.EMAIL_VERIFICATION_HOURS * 3600


token_generator = EmailVerificationTokenGenerator()


class VerificationInvalid(ApplicationError):
    code = ErrorCode.VERIFICATION_INVALID
    message = (
        "This verification link is not valid: it was used, it expired, or the address changed "
        "since. Ask for a new one."
    )


class EmailUnverified(ApplicationError):
    code = ErrorCode.EMAIL_UNVERIFIED
    message = (
        "Confirm your e-mail address first: follow the link we mailed you, or ask for a new "
        "one on your account page."
    )


class EmailAlreadyVerified(ApplicationError):
    code = ErrorCode.EMAIL_ALREADY_VERIFIED
    message = "Your address is verified already, and no change of address is waiting."


# --- tokens ----------------------------------------------------------------------------------
def verification_token_make(*, user: User) -> str:
    """A verification token for `user` as they are now: their id, a dot, the HMAC token."""
    return link_token_make(generator=token_generator, user=user)


def verification_token_user(*, token: str) -> User | None:
    """The active user `token` is valid for now, or None: malformed, unknown, used, expired,
    or outdated by a change of address."""
    return link_token_user(generator=token_generator, token=token)


# --- mail ------------------------------------------------------------------------------------
def verification_mail_queue(*, user: User, base_url: str) -> None:
    """Queue the link that confirms the address `user` is to confirm: the pending one when a
    change waits, else their own; in the caller's transaction. `base_url`: the console's
    origin (mail.links.public_base_url)."""
    address = user.email_pending or user.email
    mail_queue(
        to=address,
        template="email_verify",
        context={
            "email": address,
            "verify_url": f"{base_url}{VERIFY_PATH}/{verification_token_make(user=user)}",
            "valid_hours": settings.EMAIL_VERIFICATION_HOURS,
        },
    )


def verification_mail_rate_limit(*, user: User) -> None:
    """Count one verification mail `user` asked for (resent, or to a new address); 429 past
    RATE_LIMIT_VERIFICATION_MAIL_PER_USER, so no one mails an address over and over."""
    ratelimit.hit(
        "verification-mail:user", str(user.pk), settings.RATE_LIMIT_VERIFICATION_MAIL_PER_USER
    )


def verification_resend(*, user: User, base_url: str) -> None:
    """Mail the link again (to the pending address when a change waits). EmailAlreadyVerified
    (409) when there is nothing to confirm; RateLimited past the per-user limit."""
    fresh = User.objects.get(pk=user.pk)
    if fresh.email_verified and not fresh.email_pending:
        raise EmailAlreadyVerified()
    verification_mail_rate_limit(user=fresh)
    with transaction.atomic():
        verification_mail_queue(user=fresh, base_url=base_url)


# --- confirming ------------------------------------------------------------------------------
def email_verify(*, token: str) -> User:
    """Confirm an address with a mailed token. VerificationInvalid (400) for a token that is
    not valid now. A pending change takes effect here: the pending address becomes the
    account's, verified; should another account have taken that address since the change was
    asked for, `email_taken` (409), decided by the unique index, and nothing changes. The
    token dies with its use, even when two requests race with it: the second finds the row
    changed under its lock."""
    user = verification_token_user(token=token)
    if user is None:
        raise VerificationInvalid()
    generated = token.partition(".")[2]
    with transaction.atomic():
        locked = User.objects.select_for_update().get(pk=user.pk)
        if not token_generator.check_token(locked, generated):
            raise VerificationInvalid()
        changes = {"email_verified": True}
        if locked.email_pending:
            changes |= {"email": locked.email_pending, "email_pending": ""}
            if User.objects.filter(email=locked.email_pending).exclude(pk=locked.pk).exists():
                raise EmailTaken()
        try:
            with transaction.atomic():  # a savepoint: the index's refusal leaves the lock held
                User.objects.filter(pk=locked.pk).update(**changes)
        except IntegrityError as exc:
            raise EmailTaken() from exc
    for name, value in changes.items():
        setattr(locked, name, value)
    logger.info("user %s verified their e-mail address", locked.pk)
    return locked


def email_verified_check(*, user: User) -> None:
    """EmailUnverified (403) when REQUIRE_EMAIL_VERIFICATION is on and `user`'s address is not
    verified. Callers pass a row read in their transaction (taking a number, placing a call),
    so a verification a moment ago counts."""
    if settings.REQUIRE_EMAIL_VERIFICATION and not user.email_verified:
        raise EmailUnverified()


# --- a change of address ---------------------------------------------------------------------
def user_email_change(*, user: User, email: str, password: str, base_url: str) -> User:
    """Ask to move `user`'s account to the address `email`. PasswordMismatch (403) for a wrong
    password; InvalidRequest with `fields.email` for an address that is not one or is the
    account's already; `email_taken` (409) when another account has it (as sign-up says);
    RateLimited past the per-user verification mails. Then, in one transaction: the address
    is stored as pending, a link to confirm it is mailed to it, and the current address is
    told of the change. The account keeps its address until the link is followed
    (email_verify); a later change replaces a pending one, whose link then dies. (The caller
    counts the attempt toward the login rate limit first.)"""
    password_typed_again_check(user=user, password=password)
    new = email_address_checked(email)
    if new == user.email:
        raise InvalidRequest(
            "This is your address already.", fields={"email": ["This is your address already."]}
        )
    verification_mail_rate_limit(user=user)
    if User.objects.filter(email=new).exclude(pk=user.pk).exists():
        raise EmailTaken()
    with transaction.atomic():
        locked = User.objects.select_for_update().get(pk=user.pk)
        locked.email_pending = new
        locked.save(update_fields=["email_pending"])
        verification_mail_queue(user=locked, base_url=base_url)
        mail_queue(
            to=locked.email,
            template="email_changing",
            context={
                "email": locked.email,
                "new_email": new,
                "reset_url": f"{base_url}{RESET_PATH}",
            },
        )
    user.email_pending = new
    logger.info("user %s asked to change their e-mail address", user.pk)
    return locked
