from django.contrib import admin

from core.admin_links import OutboxAdmin
from webhooks import services
from webhooks.models import WebhookDelivery, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ("user", "url", "enabled", "disabled_reason", "failing_since", "created_at")
    list_filter = ("enabled",)
    search_fields = ("user__email", "url")
    exclude = ("secret_encrypted",)  # a secret, even encrypted, is nobody's to read here
    readonly_fields = ("user", "secret_id", "failing_since", "created_at")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(OutboxAdmin):
    list_display = (
        "created_at",
        "event_type",
        "url",
        "status",
        "attempts",
        "response_status",
        "last_error",
        "next_attempt_at",
    )
    list_filter = ("status", "event_type")
    search_fields = ("=url", "user__email", "=ordering_key")

    def retry_row(self, row):
        services.delivery_retry(row=row)
