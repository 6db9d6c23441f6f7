from django.contrib import admin, messages

from core.admin_links import EstimatedCountPaginator
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
class WebhookDeliveryAdmin(admin.ModelAdmin):
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
    ordering = ("-created_at",)
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    actions = ["retry"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Send the selected deliveries again now")
    def retry(self, request, queryset):
        for row in queryset:
            services.delivery_retry(row=row)
        self.message_user(request, f"Queued {queryset.count()} delivery(ies).", messages.SUCCESS)
