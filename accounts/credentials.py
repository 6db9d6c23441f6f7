"""Every write on a password after sign-up: changed with the current one, and recovered by a
single-use mailed link (NIST 800-63B §5.1.1, OWASP ASVS V2.5).

A reset link's token is Django's PasswordResetTokenGenerator's, behind the user's id: an HMAC
over the user's password hash, so it dies once used (the hash changes) and once the password
changes any other way, and its timestamp, so it dies after PASSWORD_RESET_TIMEOUT (30 min).
Asking for a link does the same work, in the same time, whether the address is known or not:
the request only queues a task, and the worker looks the address up and mails the link.
"""

from __future__ import annotations

import enum
import logging

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from accounts.errors import password_typed_again_check
from accounts.linktokens import link_token_make, link_token_user
from accounts.models import LoginSession, TotpDevice, User, UserManager
from accounts.services import email_key, sessions_end_all, user_api_key_regenerate
from core import ratelimit
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from core.passwords import password_hashing_slot
from mail.services import mail_queue

logger = logging.getLogger(__name__)

RESET_PATH = "/password-reset"  # the console's page (console.urls)


class ApiKeyRotation(enum.Enum):
    """Why a change of password replaces the API key, and so how its owner sees the new one
    (the password_changed mail says which)."""

    READ_BY_CALLER = "asked"  # asked for with the change: the caller's session reads it
    SHOWN_AT_SIGN_IN = "reset"  # a reset by mail: no session is left to show it to


class ResetTokenInvalid(ApplicationError):
    code = ErrorCode.RESET_TOKEN_INVALID
    message = (
        "This password reset link is not valid: it was used, is older than 30 minutes, or the "
        "password changed since. Ask for a new one."
    )


def _new_password_hash(*, user: User, password: str, field: str) -> str:
    """The hash of `password` once Django's validators accept it for `user` (InvalidRequest
    with `fields[field]` otherwise), hashed in one of the process's hashing slots."""
    try:
        validate_password(password, user=user)
    except DjangoValidationError as exc:
        raise InvalidRequest(exc.messages[0], fields={field: exc.messages}) from exc
    with password_hashing_slot():
        return make_password(password)


def _password_set(
    *,
    user: User,
    password_hash: str,
    keep: LoginSession | None,
    base_url: str,
    api_key: ApiKeyRotation | None = None,
):
    """Store the new hash, end every session but `keep`, replace the API key where `api_key`
    says so, and tell the owner by mail; in one transaction, so the mail goes only if the
    change holds."""
    now = timezone.now()
    with transaction.atomic():
        User.objects.filter(pk=user.pk).update(password=password_hash)
        user.password = password_hash
        sessions_end_all(user=user, keep=keep)
        if api_key is not None:
            user_api_key_regenerate(user=user, unseen=api_key is ApiKeyRotation.SHOWN_AT_SIGN_IN)
        mail_queue(
            to=user.email,
            template="password_changed",
            context={
                "email": user.email,
                "changed_at": now.strftime("%Y-%m-%d %H:%M"),
                "reset_url": f"{base_url}{RESET_PATH}",
                "api_key": api_key and api_key.value,
            },
        )


def user_password_change(
    *,
    user: User,
    current_password: str,
    new_password: str,
    keep: LoginSession | None,
    base_url: str,
    rotate_api_key: bool = False,
) -> None:
    """Change `user`'s password. PasswordMismatch (403) for a wrong current password;
    InvalidRequest with `fields.newPassword` for a new one the password rules refuse. Every
    session but `keep` (the caller's own; None with an API key) ends, its JWTs refused at once
    and its sockets closed (4401); the API key stays unless `rotate_api_key`, which replaces
    it in the same transaction (the caller's session, kept, reads the new one). The owner
    gets a mail. (The caller counts the attempt toward the login rate limit first.)"""
    password_typed_again_check(user=user, password=current_password)
    password_hash = _new_password_hash(user=user, password=new_password, field="newPassword")
    _password_set(
        user=user,
        password_hash=password_hash,
        keep=keep,
        base_url=base_url,
        api_key=ApiKeyRotation.READ_BY_CALLER if rotate_api_key else None,
    )
    logger.info("user %s changed their password", user.pk)


def password_reset_rate_limit(*, ip: str, email: object) -> None:
    """Count one reset asked for per client IP and per address (as typed; keyed as the lookup
    normalises it, accounts.services.email_key); 429 past either."""
    ratelimit.hit("password-reset:ip", ip, settings.RATE_LIMIT_PASSWORD_RESET_PER_IP)
    ratelimit.hit(
        "password-reset:email", email_key(email), settings.RATE_LIMIT_PASSWORD_RESET_PER_EMAIL
    )


def password_reset_confirm_rate_limit(*, ip: str) -> None:
    """Count one use of a reset token per client IP, as logins are counted; 429 past it."""
    ratelimit.hit("password-reset-confirm:ip", ip, settings.RATE_LIMIT_AUTH_PER_IP)


@task()
def password_reset_mail(email: str, base_url: str) -> None:
    password_reset_send(email=email, base_url=base_url)


def password_reset_request(*, email: str, base_url: str) -> None:
    """Ask for a reset link for `email`: queue the task that mails it, whether or not an
    account has the address, so the request says nothing of which addresses are known and
    takes the same time either way. (The caller rate-limits first.)"""
    with transaction.atomic():
        password_reset_mail.enqueue(
            email=UserManager.normalize_email_address(email)[:254], base_url=base_url
        )


def reset_token_make(*, user: User) -> str:
    """A reset token for `user`: their id, a dot, and the generator's token."""
    return link_token_make(generator=default_token_generator, user=user)


def reset_token_user(*, token: str) -> User | None:
    """The active user `token` is valid for now, or None (malformed, unknown, used, expired,
    or outdated by a change of password)."""
    return link_token_user(generator=default_token_generator, token=token)


def password_reset_send(*, email: str, base_url: str) -> bool:
    """Mail a reset link to the active account with address `email`, if there is one with a
    usable password (the worker's side of password_reset_request). Whether one was sent."""
    user = User.objects.filter(email=email, is_active=True).first()
    if user is None or not user.has_usable_password():
        return False
    mail_queue(
        to=user.email,
        template="password_reset",
        context={
            "email": user.email,
            "reset_url": f"{base_url}{RESET_PATH}/{reset_token_make(user=user)}",
            "valid_minutes": settings.PASSWORD_RESET_TIMEOUT // 60,
            # A reset keeps the second factor (it is the one thing a stolen mailbox lacks):
            # the mail says so, and where to turn should the factor be lost too.
            "two_factor": TotpDevice.objects.filter(user=user, confirmed_at__isnull=False).exists(),
            "support_email": settings.SUPPORT_EMAIL,
        },
    )
    return True


def password_reset_confirm(*, token: str, new_password: str, base_url: str) -> User:
    """Set a new password with a reset token. ResetTokenInvalid (400) for a token that is not
    valid now; InvalidRequest with `fields.newPassword` for a password the rules refuse. The
    token dies with the change (it covers the password hash), even when two requests race with
    it: the second finds the row changed under its lock. Every session ends, and the API key
    is replaced (whoever held the password may have read it): the new one is shown once at the
    console's next sign-in, and the login API answers it as always. The address the link went
    to counts as verified from then on."""
    user = reset_token_user(token=token)
    if user is None:
        raise ResetTokenInvalid()
    password_hash = _new_password_hash(user=user, password=new_password, field="newPassword")
    with transaction.atomic():
        locked = User.objects.select_for_update().get(pk=user.pk)
        if not default_token_generator.check_token(locked, token.partition(".")[2]):
            raise ResetTokenInvalid()
        _password_set(
            user=locked,
            password_hash=password_hash,
            keep=None,
            base_url=base_url,
            api_key=ApiKeyRotation.SHOWN_AT_SIGN_IN,
        )
        if not locked.email_verified:
            # The link reached the account's address: that proves it as a verification would.
            User.objects.filter(pk=locked.pk).update(email_verified=True)
            locked.email_verified = True
    logger.info("user %s reset their password", user.pk)
    return locked
