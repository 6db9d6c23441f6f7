from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import outbox
        from webhooks.models import WebhookDelivery
        from webhooks.services import webhook_outbox_write

        outbox.register("webhooks", model=WebhookDelivery, writer=webhook_outbox_write)
