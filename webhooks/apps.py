from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import outbox, userdata
        from webhooks.models import WebhookDelivery
        from webhooks.selectors import webhook_export
        from webhooks.services import webhook_erase, webhook_outbox_write

        outbox.register("webhooks", model=WebhookDelivery, writer=webhook_outbox_write)
        userdata.register(
            userdata.UserDataPart("webhooks", export=webhook_export, erase=webhook_erase)
        )
