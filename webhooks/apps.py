from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import events, outbox, userdata
        from voiceapps.hooks import signing_secret_register
        from webhooks.models import WebhookDelivery
        from webhooks.selectors import (
            OWNER_COLUMN,
            webhook_column,
            webhook_export,
            webhook_signing_secret,
        )
        from webhooks.services import webhook_erase, webhook_outbox_write

        outbox.register(events.WEBHOOKS, model=WebhookDelivery, writer=webhook_outbox_write)
        events.outbox_owner_column_register(OWNER_COLUMN, webhook_column)
        signing_secret_register(webhook_signing_secret)  # voice hooks are signed as webhooks
        userdata.register(
            userdata.UserDataPart("webhooks", export=webhook_export, erase=webhook_erase)
        )
