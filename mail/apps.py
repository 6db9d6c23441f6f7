from django.apps import AppConfig


class MailConfig(AppConfig):
    name = "mail"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import metrics
        from mail.models import MailStatus, OutboundMail

        metrics.outbox_register(
            "mail", lambda: OutboundMail.objects.filter(status=MailStatus.PENDING)
        )
