"""gunicorn's configuration for Relay's HTTP API: `gunicorn -c python:relay.gunicorn_conf
relay.wsgi:application` (runrelay passes the listening socket and the worker count).

What gunicorn refuses before Django runs (a request line or header over its limit, a line it
cannot parse) is answered in Relay's JSON error shape instead of gunicorn's HTML page, the
same bodies Daphne's refusals get (relay/platform/daphne_server.py).
"""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")

from django.conf import settings  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from gunicorn import util  # noqa: E402

from relay.server_errors import error_response  # noqa: E402
from relay.serving import serving_settings_check  # noqa: E402

try:
    serving_settings_check()
except ImproperlyConfigured as exc:
    # One line, as manage.py says it, rather than gunicorn's "Failed to read config file" and
    # a traceback (SystemExit passes through gunicorn's loader).
    sys.exit(f"Relay cannot start: {exc}")

# Threads: a request waiting in the password-hashing queue holds one thread of its worker, and the
# worker's other threads go on serving (with sync workers, a flood of logins held every worker and
# /me waited in the listen backlog: docs/benchmarks.md, http_logins). gthread stamped with each
# request's arrival (relay/platform/gunicorn_worker.py), so that its wait in the worker's own queue
# counts toward PASSWORD_HASH_WAIT_SECONDS. Each worker has PASSWORD_HASH_THREADS threads more than
# HTTP_THREADS, and requests that hash may hold only that many
# (core.passwords.admit_hashing_request): HTTP_THREADS are always left for the rest. The worker
# splits them into two pools, each with its queue (relay/platform/gunicorn_worker.py): HTTP_THREADS
# for everything else, PASSWORD_HASH_THREADS (and 2 spare) for requests that hash.
# GUNICORN_RELAY_WORKER=false: gunicorn's own gthread, one pool and no stamp (the worker reaches
# into gthread's internals).
RELAY_WORKER = "relay.platform.gunicorn_worker.RelayThreadWorker"
worker_class = RELAY_WORKER if settings.GUNICORN_RELAY_WORKER else "gthread"
workers = settings.HTTP_WORKERS
threads = settings.HTTP_THREADS + settings.PASSWORD_HASH_THREADS
# A worker whose main loop stops answering for this long is killed and replaced.
timeout = 30
graceful_timeout = 10
# Limits of what gunicorn reads before Django: a request line up to 8 KiB (gunicorn's
# maximum), a header line up to 16 KiB and at most 100 of them.
limit_request_line = 8190
limit_request_field_size = 16384
limit_request_fields = 100
# No access log: a query string may carry a token (Relay's own access line leaves it out).
# Errors go to stderr.
accesslog = None
errorlog = "-"
loglevel = settings.LOG_LEVEL.lower()
# gunicorn's own lines (start-up, workers' exits, timeouts) go through Relay's handler, so
# that they are scrubbed and shaped like every other line: JSON too on LOG_FORMAT=json.
logconfig_dict = {
    **{key: settings.LOGGING[key] for key in ("filters", "formatters", "handlers", "root")},
    "loggers": {
        "gunicorn.error": {"level": settings.LOG_LEVEL, "handlers": ["console"], "propagate": 0},
        "gunicorn.access": {"handlers": [], "propagate": 0},
    },
}
# No control socket (gunicorn 24+): a second Relay on the machine would fight over its path.
control_socket_disable = True
# Workers import Django once, in the arbiter, and fork: less memory, faster restarts.
preload_app = True


def child_exit(server, worker):
    """A worker that exits leaves its counters to the sum; its live gauges go with it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def _write_error(sock, status_int, reason, mesg):
    message = (mesg or reason).rstrip(".") + "."
    util.write_nonblock(sock, error_response(status_int, reason, message))


# gunicorn writes every refusal through this one function (workers/base.py handle_error).
util.write_error = _write_error
