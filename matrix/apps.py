from django.apps import AppConfig


class MatrixConfig(AppConfig):
    name = "matrix"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import events, outbox, userdata
        from matrix.models import MatrixMessage
        from matrix.services import matrix_erase, matrix_outbox_write

        outbox.register(events.MATRIX, model=MatrixMessage, writer=matrix_outbox_write)
        # Its part of the export is the profile's matrixId (accounts).
        userdata.register(userdata.UserDataPart("matrix", erase=matrix_erase))
