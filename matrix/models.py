from django.conf import settings
from django.db import models
from django.utils import timezone

from core.outbox import OutboxRow, outbox_indexes


class RoomStatus(models.TextChoices):
    """Where a user's direct room with the bot stands (`matrixStatus` on the API; `none` is
    having no room at all)."""

    INVITED = "invited", "Invited"
    JOINED = "joined", "Joined"
    LEFT = "left", "Left"


class MatrixRoom(models.Model):
    """The direct room of one Matrix id of one user with the bot. A user has at most one room
    in use (`ended_at` null); changing or clearing their Matrix id ends it, and a new id
    starts over with a new room. `room_id` is saved the moment the homeserver made the room,
    before the invite, so a retry never makes a second one."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="matrix_rooms"
    )
    matrix_id = models.CharField(max_length=255)
    room_id = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=10, choices=RoomStatus.choices, default=RoomStatus.INVITED)
    invite_sent_at = models.DateTimeField(null=True, blank=True)
    joined_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(ended_at__isnull=True),
                name="matrix_room_one_in_use_per_user",
            ),
        ]
        indexes = [
            models.Index(
                fields=["room_id"],
                condition=models.Q(ended_at__isnull=True),
                name="matrix_room_in_use_by_room_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.matrix_id} ({self.status})"

    @property
    def in_use(self) -> bool:
        return self.ended_at is None


class MessageKind(models.TextChoices):
    INVITE = "invite", "Room and invite"
    INBOUND = "inbound", "Inbound call"
    OUTBOUND = "outbound", "Outbound call"
    REPLY = "reply", "Reply to a command"


class MessageStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    DROPPED = "dropped", "Dropped (not to be sent)"
    FAILED = "failed", "Given up"


class MatrixMessage(OutboxRow):
    """One thing the bot must do on the homeserver for a room: make the room and invite the
    user (`invite`), or send one `m.notice`. An outbox row, written in the transaction of the
    state it reports, unique per what it reports (`key`: per call and kind, per command and
    reply), sent after commit by the worker with `txn_id` as its transaction id."""

    key = models.CharField(max_length=200, unique=True)
    room = models.ForeignKey(MatrixRoom, on_delete=models.CASCADE, related_name="messages")
    kind = models.CharField(max_length=10, choices=MessageKind.choices)
    body = models.TextField(blank=True, default="")
    formatted_body = models.TextField(blank=True, default="")
    # A reply goes into the thread of the command that asked for it.
    thread_root = models.CharField(max_length=255, blank=True, default="")
    # The call a notice is about, as the notice carries it (`org.relay.call`): {"call": Relay's
    # id of the call, "seq": the number of the event it reports}; null for any other message.
    about = models.JSONField(null=True, blank=True)
    status = models.CharField(
        max_length=10, choices=MessageStatus.choices, default=MessageStatus.PENDING
    )
    event_id = models.CharField(max_length=255, blank=True, default="")
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = outbox_indexes(
            in_order=["room"],
            in_order_name="matrix_message_pending_order",
            due_name="matrix_message_pending_due",
            newest_name="matrix_message_newest",
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.key} ({self.status})"

    @property
    def txn_id(self) -> str:
        """The transaction id of its PUT: the same on every retry, so the homeserver posts it
        once (Synapse de-duplicates per access token, and the bot keeps one token)."""
        return f"relay-{self.pk}"


class MatrixBotState(models.Model):
    """The bot's own state, one row: where its /sync stopped (`next_batch`, stored after the
    batch's events are handled, so a restart neither replays nor skips), and whether the
    homeserver refused its token (then nothing is sent until it takes it again)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    next_batch = models.CharField(max_length=500, blank=True, default="")
    token_refused_at = models.DateTimeField(null=True, blank=True)
    sync_lease_until = models.DateTimeField(null=True, blank=True)
    sync_holder = models.CharField(max_length=64, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(id=1), name="matrix_bot_state_one_row"),
        ]

    def __str__(self) -> str:
        return "Matrix bot state"
