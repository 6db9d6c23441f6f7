from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class RelayConfig(AppConfig):
    """The site itself (settings, urls, asgi, admin site, runrelay): the roof over the apps."""

    name = "relay"


class RelayAdminConfig(admin_apps.AdminConfig):
    """Django's admin, served by Relay's own admin site (its index shows the service state)."""

    default = False
    default_site = "relay.admin_site.RelayAdminSite"
