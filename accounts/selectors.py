from django.conf import settings

from accounts import apikeys
from accounts.models import DialRefusal, LoginSession, RecoveryCode, TotpDevice, User
from accounts.serializers import SessionOutput
from accounts.twofactor import Enrolment, enrolment
from core.compiled import CompiledQuery
from core.fields import represent, to_ms

_SESSION_FIELDS = tuple(field.attname for field in LoginSession._meta.concrete_fields)
_USER_FIELDS = tuple(field.attname for field in User._meta.concrete_fields)

# Read on every authenticated request, so compiled once per process (core.compiled): the
# rows themselves are read afresh each time, so an ended session or a replaced key fails on
# the very next request.
_SESSION_WITH_USER = CompiledQuery(
    lambda session_id: LoginSession.objects.filter(pk=session_id).values(
        *_SESSION_FIELDS, *(f"user__{name}" for name in _USER_FIELDS)
    ),
    session_id=LoginSession._meta.pk,
)
_USER_BY_API_KEY = CompiledQuery(
    lambda digest: User.objects.filter(api_key_digest=digest, is_active=True).values(*_USER_FIELDS),
    digest=User._meta.get_field("api_key_digest"),
)


def session_with_user(*, session_id) -> LoginSession | None:
    """The LoginSession `session_id` (a UUID) with its user loaded by the same query, active
    or not; None when there is none."""
    row = _SESSION_WITH_USER.first(session_id=session_id)
    if row is None:
        return None
    session = LoginSession.from_db("default", _SESSION_FIELDS, [row[n] for n in _SESSION_FIELDS])
    session.user = User.from_db(
        "default", _USER_FIELDS, [row[f"user__{name}"] for name in _USER_FIELDS]
    )
    return session


def user_by_api_key_digest(*, digest: str) -> User | None:
    """The active user whose API key has SHA-256 digest `digest`, or None."""
    row = _USER_BY_API_KEY.first(digest=digest)
    return None if row is None else User.from_db("default", _USER_FIELDS, list(row.values()))


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
    return TotpDevice.objects.filter(user=user, confirmed_at__isnull=False).exists()


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
