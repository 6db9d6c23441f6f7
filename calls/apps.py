from django.apps import AppConfig


class CallsConfig(AppConfig):
    name = "calls"
    verbose_name = "Calls"

    def ready(self) -> None:
        from accounts.quotas import uses_register
        from calls.selectors import dialled_uses

        uses_register(dialled_uses)
