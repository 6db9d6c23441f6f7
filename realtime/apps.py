from django.apps import AppConfig


class RealtimeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "realtime"

    def ready(self) -> None:
        from core import userdata
        from realtime.selectors import calls_export
        from realtime.services import calls_end, calls_erase

        userdata.register(
            userdata.UserDataPart("calls", export=calls_export, end=calls_end, erase=calls_erase)
        )
