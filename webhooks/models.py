import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.outbox import OutboxRow, outbox_indexes

EVENT_TYPES = (
    "call_status",
    "call_record",
    "incoming_call",
    "call_record.transcribed",
    "recording.completed",  # a bridged call's recording, with its transcript (issue 58)
)
# An endpoint that takes a record takes its transcript when that comes later, as its own
# event, whether or not it names it: it is the same record, completed.
IMPLIED_BY = {"call_record.transcribed": "call_record"}


class WebhookEndpoint(models.Model):
    """A user's webhook: where their events are POSTed, and the secret that signs every
    delivery (theirs and their calls' statusCallback URLs alike). The secret is kept only
    Fernet-encrypted, as API keys are, and shown once, when it is made."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook"
    )
    url = models.CharField(max_length=2000, blank=True, default="")
    events = models.JSONField(default=list)
    secret_encrypted = models.TextField()
    secret_id = models.CharField(max_length=32)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")
    failing_since = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user_id} -> {self.url or '(statusCallback only)'}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Given up"


class WebhookDelivery(OutboxRow):
    """One event to one URL: an outbox row written in the transaction of the state it
    reports, sent after commit by the worker, in order per (url, ordering_key)."""

    # The auto-incrementing id orders the deliveries of one call; webhook_id is the
    # Standard Webhooks message id (the receiver's de-duplication key).
    webhook_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    url = models.CharField(max_length=2000)
    ordering_key = models.CharField(max_length=120, help_text="deliveries of one call, in order")
    event_type = models.CharField(max_length=30)
    payload = models.TextField(help_text="the JSON body, exactly as signed")
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = outbox_indexes(
            in_order=["url", "ordering_key"],
            in_order_name="delivery_pending_in_order",
            due_name="delivery_pending_due",
            newest_name="delivery_newest",
        )

    def __str__(self) -> str:
        return f"{self.event_type} -> {self.url} ({self.status})"
