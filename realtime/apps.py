from django.apps import AppConfig


class RealtimeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "realtime"

    def ready(self) -> None:
        from core import userdata
        from realtime.selectors import call_recording_files, calls_export
        from realtime.services import calls_end, calls_erase

        userdata.register(
            userdata.UserDataPart(
                "calls",
                export=calls_export,
                files=call_recording_files,
                end=calls_end,
                erase=calls_erase,
            )
        )
