import uuid

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from accounts import apikeys
from core.phone import parse_country_codes

FREE_PLAN = "free"  # every user's plan at sign-up; the others are defined in settings (PLANS)


class UserManager(BaseUserManager):
    use_in_migrations = True

    @staticmethod
    def normalize_email_address(email: str) -> str:
        return (email or "").strip().lower()

    def create_user(
        self,
        email: str,
        password: str | None = None,
        *,
        password_hash: str | None = None,
        **extra,
    ) -> "User":
        """A user with an API key. `password_hash` (from make_password) replaces `password`
        for callers that hash before opening their transaction: a hash takes tens of
        milliseconds, and a SQLite transaction holds the database's write lock throughout."""
        user = self.model(email=self.normalize_email_address(email), **extra)
        if password_hash is None:
            user.set_password(password)  # None -> an unusable password
        else:
            user.password = password_hash
        user.assign_api_key(apikeys.issue())
        user.save(using=self._db)
        return user

    def create_superuser(self, email: str, password: str | None = None, **extra) -> "User":
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        extra.setdefault("email_verified", True)  # the operator vouches for their own address
        return self.create_user(email, password, **extra)

    def get_by_natural_key(self, username):
        return self.get(email=self.normalize_email_address(username))


class User(AbstractBaseUser, PermissionsMixin):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    email = models.EmailField(max_length=254, unique=True)
    # Whether the owner of `email` confirmed it by a mailed link (accounts.verification).
    # Sign-up leaves it false; staff's accounts (admin, createuser, createsuperuser) and every
    # account older than the field are verified.
    email_verified = models.BooleanField(default=False)
    # An address the user asked to move to (PUT /api/user/email): it replaces `email` only
    # once its own link is followed; "" when no change is pending.
    email_pending = models.EmailField(max_length=254, blank=True, default="", db_default="")
    plan = models.CharField(max_length=16, default=FREE_PLAN)
    # Staff's widening of the dialing policy for this user: ISO 3166 codes, comma-separated,
    # allowed on top of DIAL_ALLOWED_COUNTRIES (core.dialing).
    dial_countries = models.CharField(
        max_length=200,
        blank=True,
        default="",
        db_default="",
        help_text="Countries this user may call beyond DIAL_ALLOWED_COUNTRIES, e.g. FR,DE.",
    )
    # Staff's limits for this user instead of the plan's (accounts.quotas); blank: the plan's.
    calls_per_day = models.PositiveIntegerField(
        null=True, blank=True, help_text="Outbound calls per rolling day; blank: the plan's."
    )
    call_seconds_per_day = models.PositiveIntegerField(
        null=True, blank=True, help_text="Answered seconds per rolling day; blank: the plan's."
    )
    concurrent_calls = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls up at once; blank: the plan's."
    )
    # When the user's refusals (destinations, quotas) first passed FRAUD_FLAG_REFUSALS_PER_HOUR
    # in an hour; staff clear it in the admin.
    fraud_flagged_at = models.DateTimeField(null=True, blank=True, editable=False)
    matrix_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 - null means "not set", as the API shows it
    # Where the Matrix bot's direct room with matrix_id stands (the matrix app keeps it):
    # none, invited, joined or left. And which calls the bot tells the user about.
    matrix_status = models.CharField(max_length=10, default="none", editable=False)
    matrix_inbound = models.BooleanField(default=True)
    matrix_outbound = models.BooleanField(default=True)
    # Mail about calls to the user's numbers (history.notifications): a voicemail left, with
    # its WAV attached or not, and a missed call. Off until the user turns them on: a
    # message's audio leaves Relay only when they asked for it.
    voicemail_email = models.BooleanField(default=False, db_default=False)
    missed_call_email = models.BooleanField(default=False, db_default=False)
    attach_audio = models.BooleanField(default=True, db_default=True)
    # The user's own phone (E.164), rung beside their console tabs when a ring list's member
    # entry names them (issue 57); empty: their tabs only.
    ring_phone = models.CharField(max_length=16, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    # The API key: its SHA-256 digest for lookup, the key itself only Fernet-encrypted.
    api_key_digest = models.CharField(max_length=64, unique=True, editable=False)
    api_key_ciphertext = models.TextField(editable=False)
    # A key replaced by a password reset, not yet shown: the console's next sign-in shows it
    # once (console.views.account.api_key_new), since no page showed it when it was made.
    api_key_unseen = models.BooleanField(default=False, db_default=False, editable=False)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    class Meta:
        constraints = [
            # E-mail is unique case-insensitively because it is always stored lower-cased.
            models.CheckConstraint(
                condition=models.Q(email=Lower("email")), name="accounts_user_email_lowercase"
            ),
        ]

    def __str__(self) -> str:
        return self.email

    def clean(self) -> None:
        super().clean()
        self.email = UserManager.normalize_email_address(self.email)

    def assign_api_key(self, issued: "apikeys.IssuedApiKey") -> None:
        self.api_key_digest = issued.digest
        self.api_key_ciphertext = issued.ciphertext

    @property
    def api_key(self) -> str | None:
        return apikeys.decrypt(self.api_key_ciphertext)

    @property
    def number_limit(self) -> int:
        return settings.PLAN_NUMBER_LIMITS.get(self.plan, 0)

    @property
    def extra_dial_countries(self) -> list[str]:
        return parse_country_codes(self.dial_countries)


class DialRefusal(models.Model):
    """One call refused by the dialing policy or a quota: what flags a user for fraud review
    (accounts.services.refusal_record). Kept for REFUSALS_KEPT_DAYS (purge_expired)."""

    class Kind(models.TextChoices):
        DESTINATION = "destination", "Destination not allowed"
        QUOTA = "quota", "Quota exceeded"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="dial_refusals")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # Why: the policy's reason (country, premium_rate, ...) or the quota (calls_per_day, ...).
    reason = models.CharField(max_length=32)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["user", "-at"], name="dialrefusal_user_newest")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.kind} ({self.reason})"


class FraudRecord(models.Model):
    """What the deletion of an account keeps, and only for an account that staff flagged for
    fraud review or whose calls were refused (accounts.services.user_delete): who it was as
    a keyed digest of the e-mail address, never the address, so that staff can recognise an
    address that signs up again (the admin searches by address), and what the account tried.
    Kept FRAUD_RECORDS_KEPT (purge_expired); docs/operations.md says why."""

    email_digest = models.CharField(max_length=64, db_index=True, editable=False)
    flagged_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The refusals kept then (REFUSALS_KEPT): {"destination:premium_rate": 12, ...}.
    refusals = models.JSONField(default=dict, editable=False)
    deleted_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        indexes = [models.Index(fields=["deleted_at"], name="fraudrecord_age")]

    def __str__(self) -> str:
        return f"account deleted {self.deleted_at:%Y-%m-%d}"


class LoginSession(models.Model):
    """A login (register or login call). Its JWTs carry its id as `sid` and die with it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="login_sessions")
    created_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    active = models.BooleanField(default=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["user", "-created_at"], name="loginsession_user_newest"),
        ]

    def __str__(self) -> str:
        return f"session {self.id} of {self.user_id}"


class TotpDevice(models.Model):
    """A user's TOTP second factor (RFC 6238; accounts.twofactor). Pending until a right code
    confirms it (`confirmed_at`); only a confirmed one is asked for at login."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="totp_device")
    # The shared secret (base32), Fernet-encrypted like the API key: Relay must read it back
    # to compute codes, and the database alone must not give it away.
    secret_ciphertext = models.TextField(editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    confirmed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The time step (Unix time // 30) of the last code accepted: a code of that step or an
    # earlier one is refused, so no code is accepted twice (RFC 6238 §5.2).
    last_used_step = models.BigIntegerField(default=0, editable=False)

    def __str__(self) -> str:
        state = "on" if self.confirmed_at else "pending"
        return f"TOTP of {self.user_id} ({state})"


class RecoveryCode(models.Model):
    """One single-use code that stands in for a TOTP code, given out when the factor is turned
    on. Only its SHA-256 digest is kept: a code is 80 random bits, so a salted slow hash
    would add nothing but ten Argon2 runs to a login."""

    device = models.ForeignKey(TotpDevice, on_delete=models.CASCADE, related_name="recovery_codes")
    digest = models.CharField(max_length=64, editable=False)
    used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            # The lookup of a code presented at login, and no code twice for one device.
            models.UniqueConstraint(fields=["device", "digest"], name="recoverycode_device_digest")
        ]

    def __str__(self) -> str:
        return f"recovery code of device {self.device_id}"
