"""Every write on accounts: registration, login, sessions, profile, API key, and the user's
data: its export and the deletion of the account."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import IO
from uuid import UUID

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.hashers import make_password
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.crypto import salted_hmac
from rest_framework_simplejwt.tokens import AccessToken

from accounts import apikeys, twofactor, verification
from accounts.errors import EmailTaken, email_address_checked, password_typed_again_check
from accounts.models import FREE_PLAN, DialRefusal, FraudRecord, LoginSession, User, UserManager
from accounts.serializers import matrix_id_problem
from accounts.sessions import session_end as session_end  # re-exported: callers end sessions here
from accounts.sessions import sessions_end_all as sessions_end_all
from core import dialing, events, metrics, ratelimit, userdata
from core.db import create_unless_taken
from core.errors import ApplicationError, ErrorCode, InvalidRequest, NotFound
from core.fields import to_ms
from core.passwords import password_hashing_slot

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuthResult:
    user: User
    session: LoginSession
    token: str


class InvalidCredentials(ApplicationError):
    code, message = ErrorCode.INVALID_CREDENTIALS, "Wrong e-mail or password."


def auth_rate_limit(*, scope: str, ip: str, email: object) -> None:
    """Count one register or login attempt per client IP and per e-mail; 429 past either.
    `email` is taken as typed (whatever the body held): the bucket is keyed on the address as
    the account's lookup normalises it (UserManager.normalize_email_address), so " Me@x.org\t"
    and "me@x.org" share one bucket, as they share one account."""
    ratelimit.hit(f"{scope}:ip", ip, settings.RATE_LIMIT_AUTH_PER_IP)
    ratelimit.hit(f"{scope}:email", email_key(email), settings.RATE_LIMIT_AUTH_PER_EMAIL)


def email_key(email: object) -> str:
    """The key of a limiter counted per address: the address as typed (any JSON value),
    normalised the way the account's lookup normalises it, so that no spelling of one
    address gets a bucket of its own."""
    return UserManager.normalize_email_address(email if isinstance(email, str) else str(email))


def session_token_issue(*, session: LoginSession, lifetime: timedelta | None = None) -> str:
    """A signed access JWT for `session`'s user, carrying the session id as `sid`; it expires
    after `lifetime` when given (the console's socket token), else after the JWT setting's."""
    token = AccessToken.for_user(session.user)
    if lifetime is not None:
        token.set_exp(from_time=token.current_time, lifetime=lifetime)
    token["sid"] = str(session.id)
    return str(token)


def session_open(*, user: User) -> AuthResult:
    """Open a new login session for `user` and issue its JWT."""
    session = LoginSession.objects.create(user=user)
    return AuthResult(user=user, session=session, token=session_token_issue(session=session))


def registration_check() -> None:
    """Refuse sign-up with `registration_closed` (403) while REGISTRATION_OPEN is false."""
    if not settings.REGISTRATION_OPEN:
        raise ApplicationError(
            "Sign-up is closed on this server; ask its operator for an account.",
            code=ErrorCode.REGISTRATION_CLOSED,
        )


def user_create(
    *, email: str, password: str, plan: str = FREE_PLAN, base_url: str | None = None
) -> User:
    """Create a user (a fresh API key) with a checked password, by registration or by staff
    (`manage.py createuser`). Raises InvalidRequest with `fields.password` for a weak password
    or `fields.plan` for a plan not in PLANS, `email_taken` when the address is registered in
    any letter case, even under a race (the unique index decides), and PasswordHashingBusy
    (503) when every hashing slot is taken; then nothing is written.

    Signing up (`base_url`: the console's origin, for the link) the address starts unverified
    and a link to verify it is mailed in the transaction that creates the user; made by staff
    (`base_url` None) it counts as verified: staff vouch for it."""
    email = email_address_checked(email)
    if plan not in settings.PLANS:
        raise InvalidRequest(
            f"There is no plan {plan!r}.", fields={"plan": [f"One of {', '.join(settings.PLANS)}."]}
        )
    try:
        validate_password(password, user=User(email=email))
    except DjangoValidationError as exc:
        raise InvalidRequest(exc.messages[0], fields={"password": exc.messages}) from exc
    with password_hashing_slot():
        password_hash = make_password(password)  # slow by design: before the transaction
    with transaction.atomic():
        user = create_unless_taken(
            User.objects.create_user,
            email=email,
            password_hash=password_hash,
            plan=plan,
            email_verified=base_url is None,
        )
        if user is None:
            raise EmailTaken()
        if base_url is not None:
            verification.verification_mail_queue(user=user, base_url=base_url)
    return user


def user_register(*, email: str, password: str, base_url: str) -> AuthResult:
    """Sign-up: registration_check, user_create on the free plan (its errors; the mail that
    verifies the address, its links under `base_url`), and the user's first session."""
    registration_check()
    return session_open(user=user_create(email=email, password=password, base_url=base_url))


def user_login(*, email: str, password: str, otp: str | None = None) -> AuthResult:
    """Check the password, then the second factor, and open a session. Unknown e-mail and
    wrong password give the same InvalidCredentials, and take the same time (Django hashes a
    dummy password for unknown users). A right password whose stored hash has other
    parameters than the hasher's is re-hashed and saved (User.check_password's setter); a
    wrong one changes nothing. Only after a right password: for a user with a second factor,
    OtpRequired (401) without `otp`, OtpInvalid (401) for a wrong or used code, RateLimited
    (429) past RATE_LIMIT_OTP_PER_USER wrong codes (twofactor.otp_check), so those answers
    tell nothing to someone without the password. PasswordHashingBusy (503) when every
    hashing slot of the process is taken."""
    with password_hashing_slot():
        user = authenticate(username=UserManager.normalize_email_address(email), password=password)
    if user is None:
        raise InvalidCredentials()
    twofactor.otp_check(user=user, otp=otp)
    return session_open(user=user)


def user_login_second_step(*, user: User, otp: str | None) -> AuthResult:
    """The second step of a login taken in two (the console asks for the code on a page of
    its own): `user` is the one whose password the caller found right a moment ago, through
    user_login's OtpRequired, and keeps no password for. The code is checked as user_login
    checks it (twofactor.otp_check: its errors and rate limit), then the session opens."""
    twofactor.otp_check(user=user, otp=otp)
    return session_open(user=user)


def session_end_for_user(*, user: User, session_id: UUID | str) -> None:
    """End one of `user`'s sessions. Another user's or an unknown id is NotFound."""
    try:
        session = LoginSession.objects.get(pk=session_id, user=user)
    except (LoginSession.DoesNotExist, DjangoValidationError, ValueError) as exc:
        raise NotFound() from exc
    session_end(session=session)


def session_touch(*, session: LoginSession) -> None:
    """Move last_seen to now, at most once per SESSION_TOUCH_INTERVAL (one cheap UPDATE)."""
    now = timezone.now()
    threshold = now - timedelta(seconds=settings.SESSION_TOUCH_INTERVAL)
    if session.last_seen > threshold:
        return
    LoginSession.objects.filter(pk=session.pk, last_seen__lte=threshold).update(last_seen=now)
    session.last_seen = now


def matrix_id_check(*, matrix_id: str | None) -> None:
    """InvalidRequest unless `matrix_id` is None or a Matrix user ID, `@localpart:server`
    (the rule of accounts.serializers.MatrixIdField, for callers that did not go through
    it)."""
    problem = matrix_id_problem(matrix_id) if matrix_id is not None else None
    if problem:
        raise InvalidRequest(
            "matrixId must look like @name:server (lower-case name, at most 255 characters).",
            fields={"matrixId": [problem]},
        )


def user_matrix_id_set(*, user: User, matrix_id: str | None) -> User:
    """Store the Matrix user ID (`@localpart:server[:port]`), or clear it with None. What the
    Matrix bot does with it is matrix.services.matrix_id_set's, which calls this."""
    matrix_id_check(matrix_id=matrix_id)
    user.matrix_id = matrix_id
    user.save(update_fields=["matrix_id"])
    return user


def user_ring_phone_set(*, user: User, phone: str | None) -> User:
    """Set the phone rung with the user's tabs when a ring list names them (a member entry;
    issue 57), or none (None). The dialing policy refuses it here, for this user's countries
    (destination_not_allowed, counted for fraud review like a call), and again at each ring
    (virtual_numbers.selectors.targets_dialable), where a number of Relay's own is skipped
    too. Rate limited like forwarding (RATE_LIMIT_FORWARDING_PER_USER)."""
    ratelimit.hit("ring-phone:user", str(user.pk), settings.RATE_LIMIT_FORWARDING_PER_USER)
    if phone:
        try:
            dialing.destination_check(phone, extra_countries=user.extra_dial_countries)
        except dialing.DestinationNotAllowed as refused:
            refusal_record(user=user, kind=DialRefusal.Kind.DESTINATION, reason=refused.reason)
            raise ApplicationError(
                refused.message, code=refused.code, fields={"ringPhone": [refused.message]}
            ) from refused
    user.ring_phone = phone or ""
    user.save(update_fields=["ring_phone"])
    return user


def user_notifications_set(
    *,
    user: User,
    matrix_inbound: bool | None = None,
    matrix_outbound: bool | None = None,
    voicemail_email: bool | None = None,
    missed_call_email: bool | None = None,
    attach_audio: bool | None = None,
) -> User:
    """Switch the user's notices on or off (None leaves a switch as it is): the Matrix bot's
    of inbound calls and of ended outbound calls, and the mail of a voicemail (with its audio
    attached or not) and of a missed call (history.notifications)."""
    switches = {
        "matrix_inbound": matrix_inbound,
        "matrix_outbound": matrix_outbound,
        "voicemail_email": voicemail_email,
        "missed_call_email": missed_call_email,
        "attach_audio": attach_audio,
    }
    changed = [field for field, value in switches.items() if value is not None]
    for field in changed:
        setattr(user, field, switches[field])
    if changed:
        user.save(update_fields=changed)
    return user


def user_api_key_regenerate(*, user: User, unseen: bool = False) -> str:
    """Replace the user's API key in one UPDATE: the old key fails on the very next request,
    and its sockets close. `unseen` marks a key no page shows as it is made (a password
    reset's): the console's next sign-in shows it once (api_key_unseen_take)."""
    issued = apikeys.issue()
    User.objects.filter(pk=user.pk).update(
        api_key_digest=issued.digest, api_key_ciphertext=issued.ciphertext, api_key_unseen=unseen
    )
    user.assign_api_key(issued)
    user.api_key_unseen = unseen
    events.api_key_replaced_on_commit(user_id=user.pk)
    return issued.plaintext


def api_key_unseen_take(*, user: User) -> str | None:
    """The key a password reset made, the first time it is asked for (one conditional UPDATE,
    so two pages racing show it once between them); None once shown, or when the key was
    not replaced by a reset."""
    if not User.objects.filter(pk=user.pk, api_key_unseen=True).update(api_key_unseen=False):
        return None
    user.api_key_unseen = False
    return User.objects.only("api_key_ciphertext").get(pk=user.pk).api_key


def api_key_reveal(*, user: User, password: str) -> str:
    """`user`'s API key, for the console's "Reveal", with the account's password
    (PasswordMismatch, 403; the caller counts the attempt toward the login rate limits
    first): a signed-in browser left open does not show the key to whoever sits at it."""
    password_typed_again_check(user=user, password=password)
    return user.api_key


# --- fraud review ----------------------------------------------------------------------------
REFUSALS_KEPT = timedelta(days=7)


def refusal_record(*, user: User, kind: str, reason: str) -> None:
    """Count one call of `user` refused by the dialing policy (kind `destination`) or a quota
    (`quota`), with its reason (refusals_record with one)."""
    refusals_record([(user, kind, reason)])


def refusals_record(refusals: list[tuple[User, str, str]]) -> None:
    """Count calls refused by the dialing policy (kind `destination`) or a quota (`quota`),
    each (user, kind, reason), in a transaction of their own (the refused calls wrote
    nothing), in a fixed number of statements however many: a batch of submits records its
    refusals together. A user is flagged for staff (`fraud_flagged_at`) once
    FRAUD_FLAG_REFUSALS_PER_HOUR refusals fall within an hour; a flag stays until staff clear
    it."""
    if not refusals:
        return
    now = timezone.now()
    users = {user.pk: user for user, _, _ in refusals}
    with transaction.atomic():
        DialRefusal.objects.bulk_create(
            [
                DialRefusal(user=user, kind=kind, reason=reason, at=now)
                for user, kind, reason in refusals
            ]
        )
        recent = dict(
            DialRefusal.objects.filter(user__in=users, at__gt=now - timedelta(hours=1))
            .values("user")
            .annotate(count=Count("pk"))
            .values_list("user", "count")
        )
        over = [
            pk for pk, count in recent.items() if count >= settings.FRAUD_FLAG_REFUSALS_PER_HOUR
        ]
        flagged = []
        if over:
            unflagged = User.objects.select_for_update().filter(
                pk__in=over, fraud_flagged_at__isnull=True
            )
            flagged = list(unflagged.values_list("pk", flat=True))
            User.objects.filter(pk__in=flagged).update(fraud_flagged_at=now)
    for _, kind, reason in refusals:
        counter = (
            metrics.dial_refusals
            if kind == DialRefusal.Kind.DESTINATION
            else metrics.quota_refusals
        )
        counter.labels(reason).inc()
    for pk in flagged:
        users[pk].fraud_flagged_at = now
        metrics.users_flagged.inc()
        logger.warning(
            "user %s flagged for fraud review: %d refused calls in an hour", pk, recent[pk]
        )


def user_fraud_flag_clear(*, user: User) -> None:
    """Staff reviewed the user: clear the flag (their next run of refusals flags them again)."""
    user.fraud_flagged_at = None
    User.objects.filter(pk=user.pk).update(fraud_flagged_at=None)


def refusals_purge(*, now=None) -> int:
    """Delete refusals older than REFUSALS_KEPT; how many went."""
    now = now or timezone.now()
    deleted, _ = DialRefusal.objects.filter(at__lt=now - REFUSALS_KEPT).delete()
    return deleted


# --- the user's data: export and deletion ----------------------------------------------------
EXPORT_FORMAT = "relay-account-export"
EXPORT_VERSION = 1
FRAUD_RECORDS_KEPT = timedelta(days=365)


def password_confirm(*, user: User, password: str, ip: str) -> None:
    """The signed-in `user` types their password again before something that cannot be
    undone. Each attempt counts toward the login rate limits (per client IP and per
    e-mail, RateLimited past either), so this is no way round them to guess a password;
    PasswordMismatch (403: the caller is authenticated, the confirmation is wrong) when it
    does not match; PasswordHashingBusy (503) when every hashing slot is taken."""
    auth_rate_limit(scope="login", ip=ip, email=user.email)
    password_typed_again_check(user=user, password=password)


def user_export_archive(*, user: User) -> IO[bytes]:
    """The zip of everything Relay holds of `user` (core.userdata: account.json and every
    voicemail WAV), in a temporary file rewound to its start, for the caller to stream and
    close. RateLimited past RATE_LIMIT_EXPORT_PER_USER: it reads and zips it all."""
    ratelimit.hit("export:user", str(user.pk), settings.RATE_LIMIT_EXPORT_PER_USER)
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exportedAt": to_ms(timezone.now()),
    }
    return userdata.user_data_archive(user=user, header=header)


def user_export_filename() -> str:
    """The export's name as a download: relay-export-<today>.zip."""
    return f"relay-export-{timezone.now():%Y-%m-%d}.zip"


def email_digest(email: str) -> str:
    """A keyed digest of an e-mail address (SECRET_KEY's HMAC-SHA256): the same address gives
    the same digest on this server, and the digest does not give the address back."""
    normalized = UserManager.normalize_email_address(email)
    return salted_hmac("relay.accounts.FraudRecord", normalized, algorithm="sha256").hexdigest()


def _fraud_record_keep(user: User) -> None:
    """Keep what fraud review needs of a deleted account, if anything: only for an account
    flagged for review or with refused calls on record (accounts.models.FraudRecord)."""
    refusals = Counter(
        f"{kind}:{reason}"
        for kind, reason in DialRefusal.objects.filter(user=user).values_list("kind", "reason")
    )
    if user.fraud_flagged_at is None and not refusals:
        return
    FraudRecord.objects.create(
        email_digest=email_digest(user.email),
        flagged_at=user.fraud_flagged_at,
        refusals=dict(sorted(refusals.items())),
    )


def user_delete(*, user: User, password: str, otp: str | None, ip: str) -> None:
    """Delete `user`'s account, confirmed by their password (password_confirm: its rate
    limits and errors) and their second factor where they enrolled one (twofactor.otp_check:
    its rate limit and errors), all in one transaction with the user's row locked, so no
    call starts and no number is taken meanwhile:
    - calls in progress end first (`canceled`, hung up), then every app erases what is the
      user's (core.userdata): numbers back to the inventory as number_delete gives one back,
      history, voicemail files (once this commits), calls, the webhook, the Matrix link;
    - every session ends and every socket closes (4401), API-key sockets too;
    - the user row goes, with whatever still points at it.
    Only a FraudRecord is kept, for an account with refused calls or a fraud flag.
    A user deleted a moment ago by another request: nothing more to do."""
    password_confirm(user=user, password=password, ip=ip)
    twofactor.otp_check(user=user, otp=otp)
    with transaction.atomic():
        # FOR NO KEY UPDATE, as submits and answers lock it (accounts.quotas.user_lock): it
        # waits for them and they for it, but rows that merely point at the user are not
        # held up until the user row itself is deleted, last.
        locked = User.objects.select_for_update(no_key=True).filter(pk=user.pk).first()
        if locked is None:
            return
        userdata.user_data_end_and_erase(user=locked)
        _fraud_record_keep(locked)
        sessions_end_all(user=locked)
        events.api_key_replaced_on_commit(user_id=locked.pk)
        locked.delete()
    logger.info("user %s deleted their account", user.pk)


def fraud_records_purge(*, now=None) -> int:
    """Delete fraud records older than FRAUD_RECORDS_KEPT; how many went."""
    now = now or timezone.now()
    deleted, _ = FraudRecord.objects.filter(deleted_at__lt=now - FRAUD_RECORDS_KEPT).delete()
    return deleted
