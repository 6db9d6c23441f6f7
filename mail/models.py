from django.db import models

from core.outbox import PENDING, OutboxRow, outbox_indexes


class MailStatus(models.TextChoices):
    PENDING = PENDING, "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Given up"


class OutboundMail(OutboxRow):
    """One mail to one address, rendered when it was queued (mail.services.mail_queue) and
    sent by the worker. Once sent or given up its parts are blanked: they may carry a link
    that is a secret (a password reset), and nothing needs them after."""

    to = models.EmailField(max_length=254)
    template = models.CharField(max_length=60, help_text="which mail: its templates' name")
    subject = models.CharField(max_length=200)
    text_body = models.TextField()
    html_body = models.TextField()
    # What the mail is about, for callers that must find their mail again (a missed call's
    # throttle, a voicemail's mail withdrawn with the message); empty for most.
    topic = models.CharField(max_length=120, blank=True, default="", db_default="")
    # A file of the `recordings` storage attached when the mail is sent (a voicemail's WAV),
    # under `attachment_name`; a file gone by then leaves the mail without it.
    attachment = models.CharField(max_length=255, blank=True, default="", db_default="")
    attachment_name = models.CharField(max_length=100, blank=True, default="", db_default="")
    status = models.CharField(max_length=10, choices=MailStatus.choices, default=PENDING)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            *outbox_indexes(due_name="mail_pending_due", newest_name="mail_newest"),
            models.Index(fields=["to", "-created_at"], name="mail_to_newest"),
            models.Index(
                fields=["topic", "-created_at"], condition=~models.Q(topic=""), name="mail_topic"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.template} to {self.to} ({self.status})"
