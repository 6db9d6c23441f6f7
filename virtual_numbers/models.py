import uuid
from datetime import date

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.webrtc import BROWSER
from virtual_numbers.hours import Hours, Window


class InventoryNumber(models.Model):
    """A provisioned E.164 number the service can hand out: free while no Number holds it and
    its quarantine (`free_from`) is over. A number given back rests for
    NUMBER_QUARANTINE_HOURS first, so calls and messages meant for its last holder, who may
    still have it on a card or in a contact list, do not reach the next one."""

    e164 = models.CharField(max_length=16, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    free_from = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Given back: no one may take it before this time (blank: at once).",
    )

    class Meta:
        ordering = ["e164"]

    def __str__(self) -> str:
        return self.e164


class ForwardCallerId(models.TextChoices):
    """What a forwarded call shows its target as From."""

    CALLER = "caller", "the original caller (the number in a Diversion header)"
    NUMBER = "number", "the virtual number"


FORWARD_TARGETS_MAX = 3
RING_ENTRIES_MAX = 10


class RingStrategy(models.TextChoices):
    """How a number's ring list rings (issue 57): every entry at once, or one after another."""

    ALL = "all", "every entry at once"
    IN_ORDER = "in_order", "each entry in turn, for its own seconds"


# The kinds of a ring list's entry: each entry is a dict with exactly one of these keys (and
# an optional "ringSeconds").
RING_ENTRY_KINDS = ("phone", "sip", "member")
FORWARD_RING_SECONDS = (5, 60)  # the least and the most a number may ring its targets
FORWARD_RING_SECONDS_DEFAULT = 20
# Recorded greetings live in the recordings storage under this prefix, apart from voicemail
# messages: history's purge of files no call record names lists only the storage's top level,
# so it never sees them (docs/decisions.md, issue 44).
GREETING_PREFIX = "greetings/"
GREETING_RECORDING_MAX_SECONDS = 60
# Music on hold uploaded for a number (PUT /api/numbers/:id/hold-music, issue 58), kept
# beside the greetings and for the same reason: out of reach of the purge of unnamed files.
HOLD_MUSIC_PREFIX = "hold-music/"


def recording_with_seconds(field: str, *, name: str) -> models.CheckConstraint:
    """A recorded greeting's file name (`field`, empty: none) and its length (`field`_seconds)
    come and go together."""
    seconds = f"{field}_seconds"
    return models.CheckConstraint(
        condition=models.Q(**{field: "", f"{seconds}__isnull": True})
        | (~models.Q(**{field: ""}) & models.Q(**{f"{seconds}__isnull": False})),
        name=name,
    )


class Number(models.Model):
    """A virtual number held by a user: an inventory entry plus alias and a hashed PIN."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="numbers"
    )
    # One holder per inventory entry: the unique one-to-one is what makes a double
    # allocation impossible, whatever the races.
    inventory = models.OneToOneField(
        InventoryNumber, on_delete=models.PROTECT, related_name="holding"
    )
    number = models.CharField(max_length=16, unique=True)  # copy of inventory.e164 for joins
    alias = models.CharField(max_length=64)
    pin_hash = models.CharField(max_length=255)
    # What voicemail says to callers; empty: the service's default, which never reads the
    # alias out (an alias is the owner's private label).
    greeting = models.CharField(max_length=500, blank=True, default="")
    # A greeting the owner recorded by phone (the mailbox's 3), played in place of the spoken
    # one: its WAV file in the recordings storage, under GREETING_PREFIX; empty when none.
    greeting_recording = models.CharField(max_length=255, blank=True, default="", db_default="")
    greeting_recording_seconds = models.FloatField(null=True, blank=True)
    # Music on hold the owner uploaded (issue 58), played in place of Relay's own to the party
    # of a forwarded call whose other end holds: its WAV file (8 kHz, 16-bit, mono) in the
    # recordings storage, under HOLD_MUSIC_PREFIX; empty when none.
    hold_music = models.CharField(max_length=255, blank=True, default="", db_default="")
    hold_music_seconds = models.FloatField(null=True, blank=True)
    # The ring list (PUT /api/numbers/:id/ringing, issue 57): up to RING_ENTRIES_MAX entries
    # rung when the number is called (TELEPHONY_PROVIDER=sip), each {"phone": e164},
    # {"sip": uri} or {"member": user id}, with an optional "ringSeconds"; none: the calls
    # go to voicemail. PUT .../forwarding reads and writes the same list (forward_targets).
    # Read and written whole, with the number, like opening hours (docs/decisions.md).
    ring_entries = models.JSONField(default=list, blank=True)
    ring_strategy = models.CharField(
        max_length=8, choices=RingStrategy.choices, default=RingStrategy.ALL
    )
    # The list's own ring seconds (an entry's default), screening and caller id: the
    # forwarding settings' columns, shared by both endpoints.
    forward_ring_seconds = models.PositiveSmallIntegerField(default=FORWARD_RING_SECONDS_DEFAULT)
    forward_screening = models.BooleanField(default=False)
    forward_caller_id = models.CharField(
        max_length=8, choices=ForwardCallerId.choices, default=ForwardCallerId.CALLER
    )
    # Recording of bridged calls (PUT /api/numbers/:id/recording, issue 58): off by default;
    # when on, both parties hear the announcement (`recording_announce`, empty: the default
    # RECORDING_ANNOUNCEMENT) before each forwarded call's bridge, which is then recorded.
    recording_enabled = models.BooleanField(default=False, db_default=False)
    recording_announce = models.CharField(max_length=500, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"], name="number_owner_oldest")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(forward_ring_seconds__range=FORWARD_RING_SECONDS),
                name="number_forward_ring_seconds_range",
            ),
            models.CheckConstraint(
                condition=models.Q(forward_caller_id__in=ForwardCallerId.values),
                name="number_forward_caller_id_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(ring_strategy__in=RingStrategy.values),
                name="number_ring_strategy_valid",
            ),
            recording_with_seconds(
                "greeting_recording", name="number_greeting_recording_with_seconds"
            ),
            recording_with_seconds("hold_music", name="number_hold_music_with_seconds"),
        ]

    def __str__(self) -> str:
        return f"{self.number} ({self.alias})"

    @property
    def forward_targets(self) -> list[str]:
        """The ring list as PUT/GET .../forwarding show it: its phones, and "browser" for the
        owner's own entry (their tabs); SIP and other members' entries are left out."""
        targets = []
        for entry in self.ring_entries:
            if "phone" in entry:
                targets.append(entry["phone"])
            elif entry.get("member") == str(self.owner_id):
                targets.append(BROWSER)
        return targets


class PinFailure(models.Model):
    """A wrong currentPin: counted per number over a sliding window to lock PIN changes."""

    number = models.ForeignKey(Number, on_delete=models.CASCADE, related_name="pin_failures")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["number", "-created_at"], name="pinfailure_number_newest")]

    def __str__(self) -> str:
        return f"wrong PIN for {self.number_id} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class BlockedCaller(models.Model):
    """A caller blocked on one number: their calls are recorded as blocked, duration 0."""

    number = models.ForeignKey(Number, on_delete=models.CASCADE, related_name="blocked_callers")
    caller_num = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["number", "caller_num"], name="blockedcaller_unique_per_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.caller_num} blocked on {self.number_id}"


class OpeningHours(models.Model):
    """When a number takes calls (PUT /api/numbers/:id/hours); a number without a row is
    always open. Read through virtual_numbers.hours.Hours (`hours()`), whose `open_at` the API
    and the inbound desk share. The windows and dates are JSON, as the API takes them: they are
    only ever read and written whole, with the number (docs/decisions.md, issue 57)."""

    number = models.OneToOneField(
        Number, on_delete=models.CASCADE, primary_key=True, related_name="opening_hours"
    )
    time_zone = models.CharField(max_length=64)  # an IANA key zoneinfo knows
    # [{"days": ["mon", ...], "start": "09:00", "end": "17:30"}, ...]; empty: open all day
    weekly = models.JSONField(default=list, blank=True)
    closed_dates = models.JSONField(default=list, blank=True)  # ["2026-12-25", ...], sorted
    do_not_disturb = models.BooleanField(default=False)
    # What a caller hears while the number is closed, spoken; empty: the usual greeting.
    closed_greeting = models.CharField(max_length=500, blank=True, default="")
    # A closed greeting the owner recorded by phone (the mailbox's 4), played in place of the
    # spoken one: its WAV file in the recordings storage, under GREETING_PREFIX; empty: none.
    closed_greeting_recording = models.CharField(
        max_length=255, blank=True, default="", db_default=""
    )
    closed_greeting_recording_seconds = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "opening hours"
        constraints = [
            recording_with_seconds(
                "closed_greeting_recording", name="hours_closed_greeting_recording_with_seconds"
            ),
        ]

    def __str__(self) -> str:
        return f"opening hours of {self.number_id}"

    def hours(self) -> Hours:
        return Hours(
            time_zone=self.time_zone,
            weekly=tuple(
                Window(days=tuple(w["days"]), start=w["start"], end=w["end"]) for w in self.weekly
            ),
            closed_dates=frozenset(date.fromisoformat(d) for d in self.closed_dates),
            do_not_disturb=self.do_not_disturb,
            closed_greeting=self.closed_greeting,
            closed_greeting_recording=self.closed_greeting_recording,
        )


class MemberRole(models.TextChoices):
    """What a member of a shared number may do (issue 57): a `member` sees its history and
    voicemail; a `manager` also manages its members."""

    MEMBER = "member", "member"
    MANAGER = "manager", "manager"


class MemberStatus(models.TextChoices):
    INVITED = "invited", "invited"
    ACTIVE = "active", "active"


MEMBERS_MAX_PER_NUMBER = 20  # invited and active together
INVITATION_DAYS = 7


class NumberMember(models.Model):
    """A person a number is shared with: invited by e-mail (`status` invited, no `user`, a
    token whose SHA-256 is `token_hash`, dead after `expires_at`), then a member once the
    account of that address accepts (`status` active, `user` set, the token forgotten). One
    row from invitation to membership, so the 20 per number count both alike and one
    constraint keeps an address from being invited twice (docs/decisions.md, issue 57)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    number = models.ForeignKey(Number, on_delete=models.CASCADE, related_name="members")
    email = models.EmailField(max_length=254)  # lower case, as accounts store addresses
    role = models.CharField(max_length=8, choices=MemberRole.choices)
    status = models.CharField(max_length=8, choices=MemberStatus.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="memberships",
    )
    # Whoever sent the invitation; their account's deletion withdraws it while it is pending
    # and leaves an accepted membership in place (virtual_numbers.services.numbers_erase).
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="invitations_sent",
    )
    token_hash = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    joined_at = models.DateTimeField(null=True, blank=True)
    # What the member hears of the number's calls besides their sockets, each switched by the
    # member alone (PUT /api/numbers/shared/:id) and off until they turn it on: their own
    # webhook and Matrix room, and the mail of a missed call and of a voicemail. The owner's
    # are their account's switches, as before (docs/decisions.md, issue 57).
    notify_webhook = models.BooleanField(default=False, db_default=False)
    notify_matrix = models.BooleanField(default=False, db_default=False)
    missed_call_email = models.BooleanField(default=False, db_default=False)
    voicemail_email = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["number", "email"], name="member_one_per_address"),
            models.UniqueConstraint(
                fields=["number", "user"],
                condition=models.Q(user__isnull=False),
                name="member_one_per_user",
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=MemberRole.values), name="member_role_valid"
            ),
            # invited: a token and its end, no account yet; active: an account, no token
            models.CheckConstraint(
                condition=(
                    models.Q(status=MemberStatus.INVITED, user__isnull=True)
                    & ~models.Q(token_hash="")
                    & models.Q(expires_at__isnull=False)
                )
                | models.Q(
                    status=MemberStatus.ACTIVE,
                    user__isnull=False,
                    token_hash="",
                    joined_at__isnull=False,
                ),
                name="member_status_consistent",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "status"], name="member_numbers_of_user"),
            models.Index(fields=["invited_by"], name="member_invited_by"),
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.role}, {self.status}) on {self.number_id}"
