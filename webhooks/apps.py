from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import events, metrics
        from webhooks.models import DeliveryStatus, WebhookDelivery
        from webhooks.services import webhook_outbox_write

        events.outbox_writer_register(webhook_outbox_write)
        metrics.outbox_register(
            "webhooks", lambda: WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING)
        )
