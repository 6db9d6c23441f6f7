from django.apps import AppConfig


class CallsConfig(AppConfig):
    name = "calls"
    verbose_name = "Calls"

    def ready(self) -> None:
        # The lower apps count and delete through what this app registers with them, never
        # an import of it (docs/architecture.md, "Layers").
        from accounts.quotas import uses_register
        from calls.selectors import dialled_uses
        from calls.services import number_calls_delete
        from virtual_numbers.services import number_deletion_register

        uses_register(dialled_uses)
        number_deletion_register(number_calls_delete)
