from django.apps import AppConfig


class MailConfig(AppConfig):
    name = "mail"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import metrics, userdata
        from mail.models import MailStatus, OutboundMail
        from mail.services import mail_erase, mail_export

        metrics.outbox_register(
            "mail", lambda: OutboundMail.objects.filter(status=MailStatus.PENDING)
        )
        userdata.register(userdata.UserDataPart("mail", export=mail_export, erase=mail_erase))
