from django.apps import AppConfig


class NumbersConfig(AppConfig):
    # The package cannot be called `numbers`: that name is the standard library module that
    # `decimal` imports, and the project root comes first on sys.path. The label keeps the
    # design's name for tables, migrations and admin URLs.
    default_auto_field = "django.db.models.BigAutoField"
    name = "virtual_numbers"
    label = "numbers"
