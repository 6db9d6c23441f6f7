"""The accounts' own refusals, for every module of the app that raises them, and the checks
that raise them: a password typed again, an e-mail address given."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email

from accounts.models import UserManager
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from core.passwords import password_hashing_slot


class PasswordMismatch(ApplicationError):
    """The account's password, asked again to confirm a change (a new password or address,
    turning the second factor off, deletion), is wrong: 403, as the caller is authenticated
    (401 would tell a client its token is bad)."""

    code, message = ErrorCode.PASSWORD_MISMATCH, "The current password is wrong."


class EmailTaken(ApplicationError):
    code, message = ErrorCode.EMAIL_TAKEN, "This e-mail address is already registered."


def password_typed_again_check(*, user, password: str) -> None:
    """PasswordMismatch unless `password` is `user`'s, checked in one of the process's
    hashing slots as every password check is (PasswordHashingBusy, 503, when none is free).
    The caller counts the attempt toward the login rate limits first."""
    with password_hashing_slot():
        matches = user.check_password(password)
    if not matches:
        raise PasswordMismatch()


def email_address_checked(email: str) -> str:
    """`email` as accounts store addresses (UserManager.normalize_email_address), or
    InvalidRequest naming the field `email` when it is not an address."""
    address = UserManager.normalize_email_address(email)
    try:
        validate_email(address)
    except DjangoValidationError as exc:
        raise InvalidRequest(exc.messages[0], fields={"email": exc.messages}) from exc
    return address
