from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import DateTimeField, Exists, OuterRef
from django.utils import timezone

from accounts import apikeys, quotas
from accounts.models import DialRefusal, LoginSession, RecoveryCode, TotpDevice, User
from accounts.serializers import SessionOutput
from accounts.twofactor import Enrolment, enrolment
from core.fields import represent, to_ms
from core.platform.compiled import CompiledQuery

_SESSION_FIELDS = tuple(field.attname for field in LoginSession._meta.concrete_fields)
_USER_FIELDS = tuple(field.attname for field in User._meta.concrete_fields)


@dataclass(frozen=True)
class ProfileExtras:
    """What GET /api/user/me shows beyond the user's row, read by the authentication's query
    along with the row (`profile_at` below): the quota use at `at` and the second factor."""

    use: dict  # accounts.quotas.use_of_row
    two_factor: bool
    at: datetime


def _factor_on(user_ref):
    """The user's confirmed second factor (`user_ref`: the user's pk, or an OuterRef to it)."""
    return TotpDevice.objects.filter(user=user_ref, confirmed_at__isnull=False)


def _profile_columns(user_ref, since) -> dict:
    """The columns of ProfileExtras for a query that reads the user (`user_ref`: an OuterRef
    to its pk): the use since `since` (accounts.quotas owns what it is) and the factor."""
    return {
        **quotas.use_columns(user_ref=user_ref, since=since),
        "two_factor": Exists(_factor_on(user_ref)),
    }


def _profile_extras(row: dict, at: datetime) -> ProfileExtras:
    return ProfileExtras(use=quotas.use_of_row(row), two_factor=row["two_factor"], at=at)


# Read on every authenticated request, so compiled once per process (core.platform.compiled): the
# rows themselves are read afresh each time, so an ended session or a replaced key fails on
# the very next request. Given `since`, each also reads the user's ProfileExtras, in the
# same statement: GET /api/user/me costs one round trip.
_SESSION_WITH_USER = CompiledQuery(
    lambda session_id, since=None: LoginSession.objects.filter(pk=session_id).values(
        *_SESSION_FIELDS,
        *(f"user__{name}" for name in _USER_FIELDS),
        **({} if since is None else _profile_columns(OuterRef("user_id"), since)),
    ),
    session_id=LoginSession._meta.pk,
    since=DateTimeField(),
)
_USER_BY_API_KEY = CompiledQuery(
    lambda digest, since=None: User.objects.filter(api_key_digest=digest, is_active=True).values(
        *_USER_FIELDS, **({} if since is None else _profile_columns(OuterRef("pk"), since))
    ),
    digest=User._meta.get_field("api_key_digest"),
    since=DateTimeField(),
)


def _window_from(profile_at: datetime | None) -> dict:
    return {} if profile_at is None else {"since": profile_at - quotas.WINDOW}


def session_with_user(*, session_id, profile_at: datetime | None = None) -> LoginSession | None:
    """The LoginSession `session_id` (a UUID) with its user loaded by the same query, active
    or not; None when there is none. With `profile_at`, the same query also reads the user's
    ProfileExtras at that moment, left on the user as `profile_extras` (user_profile)."""
    row = _SESSION_WITH_USER.first(session_id=session_id, **_window_from(profile_at))
    if row is None:
        return None
    session = LoginSession.from_db("default", _SESSION_FIELDS, [row[n] for n in _SESSION_FIELDS])
    session.user = User.from_db(
        "default", _USER_FIELDS, [row[f"user__{name}"] for name in _USER_FIELDS]
    )
    if profile_at is not None:
        session.user.profile_extras = _profile_extras(row, profile_at)
    return session


def user_by_api_key_digest(*, digest: str, profile_at: datetime | None = None) -> User | None:
    """The active user whose API key has SHA-256 digest `digest`, or None. With `profile_at`,
    as session_with_user: the user carries its `profile_extras`, read by the same query."""
    row = _USER_BY_API_KEY.first(digest=digest, **_window_from(profile_at))
    if row is None:
        return None
    user = User.from_db("default", _USER_FIELDS, [row[name] for name in _USER_FIELDS])
    if profile_at is not None:
        user.profile_extras = _profile_extras(row, profile_at)
    return user


def credential_current(*, user: User, session: LoginSession | None) -> bool:
    """Whether the credential a socket was opened with still holds: its login session still
    active, or (an API key's socket) the user still active with the same key. For a socket
    that has joined its groups: a session ended between its authentication and the joining
    sent its close to no one (realtime.consumers)."""
    if session is not None:
        return LoginSession.objects.filter(
            pk=session.pk, active=True, user__is_active=True
        ).exists()
    return User.objects.filter(
        pk=user.pk, is_active=True, api_key_digest=user.api_key_digest
    ).exists()


def user_profile(*, user: User) -> dict:
    """What GET /api/user/me renders (accounts.serializers.MeOutput): the user, each of its
    quotas and whether a second factor is on. The use and the factor are the user's
    `profile_extras` when its authentication read them (session_with_user,
    user_by_api_key_digest); otherwise they are read here."""
    extras = getattr(user, "profile_extras", None)
    if extras is None:
        counted = quotas.quotas_of(user, now=timezone.now())
        two_factor = two_factor_enabled(user=user)
    else:
        counted = quotas.quotas_of(user, now=extras.at, use=extras.use)
        two_factor = extras.two_factor
    return {
        "user": user,
        "two_factor": two_factor,
        "quotas": {quota.name: quota for quota in counted},
    }


def sessions_newest(*, user: User) -> list[LoginSession]:
    """The user's newest login sessions, active or ended (DASHBOARD_SESSION_COUNT of them)."""
    return list(
        LoginSession.objects.filter(user=user).order_by("-created_at", "-id")[
            : settings.DASHBOARD_SESSION_COUNT
        ]
    )


def account_export(*, user: User) -> dict:
    """accounts' part of the user's export (core.userdata): the profile (never the password
    hash nor the API key), the login sessions, and the calls the dialing policy or a quota
    refused."""
    return {
        "profile": {
            "id": str(user.pk),
            "email": user.email,
            "plan": user.plan,
            "matrixId": user.matrix_id,
            "matrixStatus": user.matrix_status,
            "matrixInbound": user.matrix_inbound,
            "matrixOutbound": user.matrix_outbound,
            "ringPhone": user.ring_phone or None,
            "createdAt": to_ms(user.created_at),
        },
        "sessions": [
            represent(SessionOutput, session)
            for session in LoginSession.objects.filter(user=user).order_by("-created_at", "-id")
        ],
        "dialRefusals": [
            {"kind": kind, "reason": reason, "at": to_ms(at)}
            for kind, reason, at in DialRefusal.objects.filter(user=user)
            .order_by("-at")
            .values_list("kind", "reason", "at")
        ],
    }


def two_factor_enabled(*, user: User) -> bool:
    """Whether `user` has a confirmed second factor (login asks for its code)."""
    return _factor_on(user).exists()


def two_factor_pending(*, user: User) -> Enrolment | None:
    """The enrolment `user` started and has not confirmed yet (its secret, URI and QR code,
    to show again), or None."""
    device = TotpDevice.objects.filter(user=user, confirmed_at__isnull=True).first()
    secret = apikeys.decrypt(device.secret_ciphertext) if device is not None else None
    return None if secret is None else enrolment(user=user, secret=secret)


def recovery_codes_left(*, user: User) -> int:
    """How many unused recovery codes `user` has (0 without a factor that is on)."""
    return RecoveryCode.objects.filter(
        device__user=user, device__confirmed_at__isnull=False, used_at__isnull=True
    ).count()
