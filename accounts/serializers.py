import re

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from core.fields import (
    TEXT_PATTERN,
    DialableNumberField,
    MillisecondsField,
    StrictBooleanField,
    StrictCharField,
    SuccessField,
    TextField,
)

MATRIX_STATUSES = ("none", "invited", "joined", "left")
# Matrix user ID: @localpart:server_name, server_name = host [":" port]. The schema states
# the looser MATRIX_ID_PATTERN; MATRIX_ID_RE is the rule.
MATRIX_ID_PATTERN = r"^@[a-z0-9._=/+\-]+:[A-Za-z0-9.\-\[\]:]+$"
MATRIX_ID_RE = re.compile(
    r"^@[a-z0-9._=/+\-]+:"
    r"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9](?:[A-Za-z0-9\-.]*[A-Za-z0-9])?)"
    r"(?::[0-9]{1,5})?$"
)
MATRIX_ID_MAX_LENGTH = 255


def matrix_id_problem(value: str) -> str | None:
    """Why `value` is not a Matrix user ID (`@localpart:server[:port]`, a lower-case
    localpart, at most 255 characters), or None when it is one."""
    if len(value) > MATRIX_ID_MAX_LENGTH or not MATRIX_ID_RE.match(value):
        return "Not a valid Matrix user ID."
    return None


@extend_schema_field(
    {
        "type": "string",
        "minLength": 8,
        "maxLength": settings.PASSWORD_MAX_LENGTH,
        "pattern": TEXT_PATTERN,
    }
)
class PasswordField(StrictCharField):
    """A new password: at most PASSWORD_MAX_LENGTH characters, its spaces kept."""

    def __init__(self, **kwargs):
        super().__init__(max_length=settings.PASSWORD_MAX_LENGTH, trim_whitespace=False, **kwargs)


class TypedPasswordField(TextField):
    """The account's password, typed again: as a new one's bounds, and no more checked."""

    def __init__(self, **kwargs):
        super().__init__(max_length=settings.PASSWORD_MAX_LENGTH, trim_whitespace=False, **kwargs)


class MatrixStatusField(serializers.ChoiceField):
    """`matrixStatus`: where the Matrix bot's direct room with the user stands."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "help_text",
            "none: no Matrix id (or Matrix is off); invited: the bot's invite waits for you; "
            "joined: you get notices and may type commands; left: nothing is sent",
        )
        super().__init__(choices=MATRIX_STATUSES, **kwargs)


@extend_schema_field(
    {"type": "string", "maxLength": 255, "pattern": MATRIX_ID_PATTERN, "nullable": True}
)
class MatrixIdField(StrictCharField):
    """A Matrix user ID (matrix_id_problem), or null where the field allows it."""

    def run_validation(self, data=empty):
        # After the type, blank and length checks, as the rule always came after them.
        value = super().run_validation(data)
        problem = matrix_id_problem(value) if value is not None else None
        if problem:
            raise serializers.ValidationError(problem)
        return value


OTP_MAX_LENGTH = 64


@extend_schema_field(
    {"type": "string", "minLength": 1, "maxLength": OTP_MAX_LENGTH, "pattern": TEXT_PATTERN}
)
class OtpField(StrictCharField):
    """A second-factor code: six digits from the authenticator app, or a recovery code
    (xxxx-xxxx-xxxx-xxxx, any case, dashes and spaces optional). Only its type and length are
    checked here: any other string is simply a wrong code (otp_invalid, counted as one)."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "help_text",
            "The 6-digit code of your authenticator app, or one of your recovery codes.",
        )
        super().__init__(max_length=OTP_MAX_LENGTH, trim_whitespace=False, **kwargs)


# --- input ---------------------------------------------------------------------------------
class CredentialsInput(serializers.Serializer):
    email = TextField(max_length=254, trim_whitespace=True)
    password = TypedPasswordField()
    otp = OtpField(
        required=False,
        help_text="Only for an account with a second factor: the 6-digit code of its "
        "authenticator app, or one of its recovery codes (each works once).",
    )


class EmailAddressField(serializers.EmailField):
    """An e-mail address, lower-cased; only a string (EmailField would take a number)."""

    def __init__(self, **kwargs):
        super().__init__(max_length=254, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data).strip().lower()


class RegisterInput(CredentialsInput):
    email = EmailAddressField()
    password = PasswordField()
    otp = None  # a new account has no second factor


class PasswordChangeInput(serializers.Serializer):
    currentPassword = TypedPasswordField()  # noqa: N815
    newPassword = PasswordField()  # noqa: N815
    rotateApiKey = StrictBooleanField(  # noqa: N815
        required=False,
        default=False,
        help_text="also replace the API key (read the new one from GET /api/dashboard)",
    )


class PasswordResetInput(serializers.Serializer):
    email = EmailAddressField()


class PasswordResetConfirmInput(serializers.Serializer):
    token = TextField(max_length=200, help_text="The token of the mailed link, as it stands.")
    newPassword = PasswordField()  # noqa: N815


class AccountDeleteInput(serializers.Serializer):
    password = TypedPasswordField(help_text="your password, typed again")
    otp = TextField(
        max_length=64,
        required=False,
        allow_null=True,
        trim_whitespace=True,
        help_text="a code of your second factor, where you enrolled one",
    )


class LoginCodeInput(serializers.Serializer):
    # The second step of a login taken in two (the console's code page).
    otp = OtpField()


class PasswordConfirmInput(serializers.Serializer):
    # The account's password, asked again before a step that a session alone must not take
    # (turning a second factor on, the console's "Reveal" of the API key).
    password = TypedPasswordField()


class TwoFactorConfirmInput(serializers.Serializer):
    code = OtpField(help_text="The 6-digit code the authenticator app shows for the secret.")


class TwoFactorDisableInput(serializers.Serializer):
    password = TypedPasswordField()
    code = OtpField()


class MatrixIdInput(serializers.Serializer):
    matrixId = MatrixIdField(allow_null=True, max_length=1024, trim_whitespace=False)  # noqa: N815


class NotificationsInput(serializers.Serializer):
    matrixInbound = StrictBooleanField(  # noqa: N815
        required=False, help_text="notices of calls to your numbers"
    )
    matrixOutbound = StrictBooleanField(  # noqa: N815
        required=False, help_text="notices of your calls that ended"
    )
    voicemailEmail = StrictBooleanField(  # noqa: N815
        required=False, help_text="a mail for each voicemail left on your numbers"
    )
    missedCallEmail = StrictBooleanField(  # noqa: N815
        required=False,
        help_text="a mail for a missed call (at most one per caller and number in 10 minutes)",
    )
    attachAudio = StrictBooleanField(  # noqa: N815
        required=False,
        help_text="attach the voicemail's WAV to its mail (up to VOICEMAIL_EMAIL_MAX_MB; "
        "else the mail links it)",
    )


class RingPhoneInput(serializers.Serializer):
    ringPhone = DialableNumberField(  # noqa: N815
        allow_null=True,
        help_text="Your phone, E.164, rung with your console tabs when a number's ring list "
        "names you (a member entry); null: your tabs only.",
    )


class RingPhoneOutput(serializers.Serializer):
    ringPhone = serializers.CharField(  # noqa: N815
        source="ring_phone", allow_null=True, help_text="null: none set."
    )

    def to_representation(self, instance):
        return {"ringPhone": instance.ring_phone or None}


# --- e-mail verification and change of address (accounts.verification) ---------------------
class VerifyEmailInput(serializers.Serializer):
    token = TextField(
        max_length=100,
        trim_whitespace=True,
        help_text="The last part of the link's path: the user's id, a dot, the token.",
    )


class EmailChangeInput(serializers.Serializer):
    email = serializers.EmailField(max_length=254, help_text="The new address.")
    password = TypedPasswordField(
        help_text="Your current password.",
    )

    def to_internal_value(self, data):
        # EmailField coerces numbers to strings; the API takes only strings.
        if isinstance(data, dict) and "email" in data and not isinstance(data["email"], str):
            raise serializers.ValidationError({"email": ["Must be a string."]})
        return super().to_internal_value(data)


EMAIL_VERIFIED_HELP = (
    "Whether the address was confirmed by the mailed link (or vouched for by staff). With "
    "REQUIRE_EMAIL_VERIFICATION, numbers and calls wait for it."
)


@extend_schema_field({"type": "string", "format": "email", "nullable": True})
class PendingEmailField(serializers.Field):
    """The address a change waits to move to until its link is followed; null when none."""

    def to_representation(self, value):
        return value or None


class EmailChangeOutput(serializers.Serializer):
    # Renders the User.
    email = serializers.EmailField(
        help_text="The account's address, until the new one is confirmed."
    )
    pendingEmail = PendingEmailField(source="email_pending")  # noqa: N815


# --- output --------------------------------------------------------------------------------
class AuthUserOutput(serializers.Serializer):
    id = serializers.UUIDField()
    email = serializers.EmailField()
    apiKey = serializers.CharField(source="api_key")  # noqa: N815


class AuthOutput(serializers.Serializer):
    token = serializers.CharField(help_text="Access JWT; send as `Authorization: Bearer`.")
    user = AuthUserOutput()


class QuotaOutput(serializers.Serializer):
    limit = serializers.IntegerField(
        allow_null=True, help_text="The most allowed; null: unlimited."
    )
    used = serializers.IntegerField(help_text="Used now.")
    resetsAt = MillisecondsField(  # noqa: N815
        source="resets_at",
        allow_null=True,
        help_text="When the use next drops, as the oldest use leaves the rolling 24 hours; "
        "null when nothing is counted, and always for concurrentCalls.",
    )


class QuotasOutput(serializers.Serializer):
    callsPerDay = QuotaOutput(  # noqa: N815
        source="calls_per_day", help_text="Outbound calls placed in the last 24 hours."
    )
    callSecondsPerDay = QuotaOutput(  # noqa: N815
        source="call_seconds_per_day",
        help_text="Answered seconds of outbound calls in the last 24 hours (a call up now "
        "counts the seconds it was granted).",
    )
    concurrentCalls = QuotaOutput(  # noqa: N815
        source="concurrent_calls", help_text="Outbound calls not yet ended."
    )


class MeOutput(serializers.Serializer):
    # Renders {"user": <User>, "two_factor": bool, "quotas": {<quota name>: <Quota>}}
    # (accounts.selectors.user_profile), so the serializer reads nothing but its instance.
    id = serializers.UUIDField(source="user.id")
    email = serializers.EmailField(source="user.email")
    plan = serializers.CharField(source="user.plan")
    matrixId = serializers.CharField(source="user.matrix_id", allow_null=True)  # noqa: N815
    matrixStatus = MatrixStatusField(source="user.matrix_status")  # noqa: N815
    matrixInbound = serializers.BooleanField(source="user.matrix_inbound")  # noqa: N815
    matrixOutbound = serializers.BooleanField(source="user.matrix_outbound")  # noqa: N815
    createdAt = MillisecondsField(source="user.created_at")  # noqa: N815
    emailVerified = serializers.BooleanField(  # noqa: N815
        source="user.email_verified", help_text=EMAIL_VERIFIED_HELP
    )
    pendingEmail = PendingEmailField(source="user.email_pending")  # noqa: N815
    quotas = QuotasOutput(read_only=True, help_text="The plan's quotas and their use.")
    twoFactor = serializers.BooleanField(  # noqa: N815
        source="two_factor", help_text="Whether login asks for a second factor's code."
    )


class NotificationsOutput(serializers.Serializer):
    # Renders the User.
    success = SuccessField()
    matrixInbound = serializers.BooleanField(source="matrix_inbound")  # noqa: N815
    matrixOutbound = serializers.BooleanField(source="matrix_outbound")  # noqa: N815
    voicemailEmail = serializers.BooleanField(source="voicemail_email")  # noqa: N815
    missedCallEmail = serializers.BooleanField(source="missed_call_email")  # noqa: N815
    attachAudio = serializers.BooleanField(source="attach_audio")  # noqa: N815


class TwoFactorEnrolmentOutput(serializers.Serializer):
    # Renders accounts.twofactor.Enrolment.
    secret = serializers.CharField(help_text="The shared secret, base32, to type in by hand.")
    otpauthUri = serializers.CharField(  # noqa: N815
        source="otpauth_uri", help_text="The secret as an otpauth://totp/ URI."
    )
    qrSvg = serializers.CharField(  # noqa: N815
        source="qr_svg", help_text="The URI as a QR code, an SVG document."
    )


class RecoveryCodesOutput(serializers.Serializer):
    recoveryCodes = serializers.ListField(  # noqa: N815
        child=serializers.CharField(),
        help_text="Ten single-use codes that stand in for the app's code; shown this once.",
    )


class ApiKeyOutput(serializers.Serializer):
    apiKey = serializers.CharField()  # noqa: N815


class SessionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    created_at = MillisecondsField()
    last_seen = MillisecondsField()
    active = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.INT)
    def get_active(self, session) -> int:
        return 1 if session.active else 0


class DashboardOutput(serializers.Serializer):
    # Renders {"user": <User>, "ws_url": <the socket's URL>, "sessions": [<LoginSession>]}.
    email = serializers.EmailField(source="user.email")
    plan = serializers.CharField(source="user.plan")
    matrixId = serializers.CharField(source="user.matrix_id", allow_null=True)  # noqa: N815
    matrixStatus = MatrixStatusField(source="user.matrix_status")  # noqa: N815
    apiKey = serializers.CharField(source="user.api_key")  # noqa: N815
    emailVerified = serializers.BooleanField(  # noqa: N815
        source="user.email_verified", help_text=EMAIL_VERIFIED_HELP
    )
    wsUrl = serializers.CharField(source="ws_url")  # noqa: N815
    sessions = SessionOutput(many=True)
