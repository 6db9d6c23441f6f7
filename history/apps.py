from django.apps import AppConfig


class HistoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "history"

    def ready(self) -> None:
        from core import userdata
        from history.selectors import history_export, voicemail_files
        from history.services import history_erase

        userdata.register(
            userdata.UserDataPart(
                "history", export=history_export, files=voicemail_files, erase=history_erase
            )
        )
