"""WSGI entry point: the HTTP API under gunicorn's threaded workers (relay/gunicorn_conf.py),
Django behind the admission of requests that hash (relay/admission.py). WebSocket clients are
Daphne's (relay/asgi.py)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")
django_application = get_wsgi_application()

from relay.admission import HashingAdmission  # noqa: E402 - Django is set up above

application = HashingAdmission(django_application)
