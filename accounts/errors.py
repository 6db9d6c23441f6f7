"""The accounts' own refusals, for every module of the app that raises them."""

from core.errors import ApplicationError, ErrorCode


class PasswordMismatch(ApplicationError):
    """The account's password, asked again to confirm a change (a new password or address,
    turning the second factor off, deletion), is wrong: 403, as the caller is authenticated
    (401 would tell a client its token is bad)."""

    code, message = ErrorCode.PASSWORD_MISMATCH, "The current password is wrong."
