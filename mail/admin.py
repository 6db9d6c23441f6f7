from django.contrib import admin

from core.admin_links import ReadOnlyAdmin
from mail.models import OutboundMail


@admin.register(OutboundMail)
class OutboundMailAdmin(ReadOnlyAdmin):
    """What was sent to whom and how it went; never a mail's parts, which may carry a link
    that is a secret."""

    list_display = ("created_at", "template", "to", "status", "attempts", "sent_at")
    list_filter = ("status", "template")
    search_fields = ("to",)
    ordering = ("-created_at",)
    fields = (
        "to",
        "template",
        "subject",
        "status",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "last_error",
        "created_at",
    )
    readonly_fields = fields
