from django.apps import AppConfig


class HistoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "history"

    def ready(self) -> None:
        from core import userdata
        from history.recordings import (
            call_recording_files,
            call_recordings_erase,
            call_recordings_export,
        )
        from history.selectors import history_export, voicemail_files
        from history.services import history_erase

        # Before history's part: its erase reads the files its calls' deletion would take.
        userdata.register(
            userdata.UserDataPart(
                "call_recordings",
                export=call_recordings_export,
                files=call_recording_files,
                erase=call_recordings_erase,
            )
        )
        userdata.register(
            userdata.UserDataPart(
                "history", export=history_export, files=voicemail_files, erase=history_erase
            )
        )
