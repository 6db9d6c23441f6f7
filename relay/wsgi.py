"""WSGI entry point: the HTTP API under gunicorn's threaded workers (relay/gunicorn_conf.py).
WebSocket clients are Daphne's (relay/asgi.py)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")
application = get_wsgi_application()
