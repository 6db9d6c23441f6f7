from django.apps import AppConfig


class NumbersConfig(AppConfig):
    # The package cannot be called `numbers`: that name is the standard library module that
    # `decimal` imports, and the project root comes first on sys.path. The label keeps the
    # design's name for tables, migrations and admin URLs.
    default_auto_field = "django.db.models.BigAutoField"
    name = "virtual_numbers"
    label = "numbers"

    def ready(self) -> None:
        from core import userdata
        from virtual_numbers.selectors import numbers_export, numbers_greeting_files
        from virtual_numbers.services import numbers_erase

        userdata.register(
            userdata.UserDataPart(
                "numbers",
                export=numbers_export,
                files=numbers_greeting_files,
                erase=numbers_erase,
            )
        )
