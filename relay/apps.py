import sqlite3
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.contrib.admin import apps as admin_apps
from django.db.backends.signals import connection_created

# What one SQLite statement may bind since SQLite 3.32 (SQLITE_MAX_VARIABLE_NUMBER), where
# Django assumes the 999 of older releases and splits a bulk INSERT of a batch of submits'
# rows into several statements.
SQLITE_MAX_QUERY_PARAMS = 32766


def _sqlite_query_params(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 32):
        connection.features.max_query_params = SQLITE_MAX_QUERY_PARAMS


class RelayConfig(AppConfig):
    """The site itself (settings, urls, asgi, admin site, runrelay): the roof over the apps."""

    name = "relay"

    def ready(self) -> None:
        # The runtime folder (SQLite file, embedded Redis socket, static files) exists before
        # any process writes to it; settings only name it. Made 0700 by whichever process
        # comes first: it holds the database and the secret key (runrelay also narrows one an
        # older release made wider).
        Path(settings.VAR_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
        connection_created.connect(_sqlite_query_params, dispatch_uid="relay.sqlite_query_params")


class RelayAdminConfig(admin_apps.AdminConfig):
    """Django's admin, served by Relay's own admin site (its index shows the service state)."""

    default = False
    default_site = "relay.admin_site.RelayAdminSite"
