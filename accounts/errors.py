"""The accounts' own refusals, for every module of the app that raises them, and the check
of a password typed again that raises one."""

from core.errors import ApplicationError, ErrorCode
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
