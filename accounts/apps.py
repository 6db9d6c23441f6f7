from django.apps import AppConfig


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"

    def ready(self) -> None:
        from accounts.selectors import account_export
        from core import userdata

        # First, so account.json opens with the profile.
        userdata.register(userdata.UserDataPart("accounts", export=account_export))
