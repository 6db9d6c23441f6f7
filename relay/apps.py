from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.contrib.admin import apps as admin_apps


class RelayConfig(AppConfig):
    """The site itself (settings, urls, asgi, admin site, runrelay): the roof over the apps."""

    name = "relay"

    def ready(self) -> None:
        # The runtime folder (SQLite file, embedded Redis socket, static files) exists before
        # any process writes to it; settings only name it.
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)


class RelayAdminConfig(admin_apps.AdminConfig):
    """Django's admin, served by Relay's own admin site (its index shows the service state)."""

    default = False
    default_site = "relay.admin_site.RelayAdminSite"
