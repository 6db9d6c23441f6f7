"""Relay's settings with bench/plain_urls.py as the URLconf: the plain Django view that sits
beside Relay's HTTP endpoints as the framework's ceiling.

Served by a gunicorn of its own with Relay's configuration (`DJANGO_SETTINGS_MODULE=
bench.plain_settings python -m gunicorn -c python:relay.gunicorn_conf relay.wsgi:application`),
so the view runs under the same server, workers, middleware, database and logging as Relay
does; only the URLconf differs, and the view is never reachable from relay/urls.py.
"""

from relay.settings import *  # noqa: F403 - every setting of Relay's, one overridden below

ROOT_URLCONF = "bench.plain_urls"
