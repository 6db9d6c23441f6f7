from django.apps import AppConfig


class MatrixConfig(AppConfig):
    name = "matrix"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import events, metrics
        from matrix.models import MatrixMessage, MessageStatus
        from matrix.services import matrix_outbox_write

        events.outbox_writer_register(matrix_outbox_write)
        metrics.outbox_register(
            "matrix", lambda: MatrixMessage.objects.filter(status=MessageStatus.PENDING)
        )
