"""HTTP and sockets: the server processes and their threads, the ports and URLs clients reach
them at, and the largest body the API reads."""

import os

from relay.settings.base import VAR_DIR
from relay.settings.readers import boolean, seconds, text, url, whole_number

# HTTP is served by gunicorn's threaded workers (relay/wsgi.py), WebSocket by Daphne
# (relay/asgi.py).
ASGI_APPLICATION = "relay.asgi.application"
WSGI_APPLICATION = "relay.wsgi.application"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Server processes (runrelay, relay/gunicorn_conf.py): gunicorn workers for HTTP, two per
# core, each serving HTTP_THREADS requests at once on threads of its own (gthread), so that a
# request that waits (its turn to hash a password, the database) holds a thread, not the
# process: a flood of logins no longer leaves every other request in the listen backlog.
# Daphne processes share the WebSocket port.
HTTP_WORKERS = whole_number("HTTP_WORKERS", 2 * usable_cpus(), maximum=256)
HTTP_THREADS = whole_number("HTTP_THREADS", 8, maximum=64)
WS_PROCESSES = whole_number("WS_PROCESSES", 1, maximum=64)
# runrelay's first purge_expired comes this long after its start, not with it: at start it
# would be one more Django process starting beside the servers, and a Relay stopped within a
# minute (a test's, an operator's check) has nothing to purge that could not wait.
HOUSEKEEPING_DELAY_SECONDS = seconds("HOUSEKEEPING_DELAY_SECONDS", 60.0, maximum=600.0)
# gunicorn's worker: Relay's gthread (relay/platform/gunicorn_worker.py: each request stamped with
# its arrival, and threads of their own for requests that hash), written against gthread's internals
# of gunicorn 27.0. Off: gunicorn's own gthread, every request in one pool, its wait counted from
# when Django sees it (an off switch for an upgrade; tests/platform/edges.py).
GUNICORN_RELAY_WORKER = boolean("GUNICORN_RELAY_WORKER", True)
# Daphne's HTTP channel answering what Twisted cannot parse with Relay's JSON errors
# (relay/platform/daphne_server.py), through Twisted internals. Off: Twisted's own channel, a bare
# 400 for those (an off switch for an upgrade; tests/platform/edges.py).
DAPHNE_JSON_REFUSALS = boolean("DAPHNE_JSON_REFUSALS", True)
# Output serializers compiled into plain functions, keyed on DRF's method identity and its
# _readable_fields (core/platform/representation.py). Off: each is rendered by DRF itself, the same
# dict (an upgrade of DRF that changed those internals; tests/platform/edges.py).
COMPILED_REPRESENTATION = boolean("COMPILED_REPRESENTATION", True)

PUBLIC_WS_URL = text("PUBLIC_WS_URL")
# Where people reach the console (https://relay.example.com): the base of every link a mail
# carries. Unset, the host of the request that caused the mail, which ALLOWED_HOSTS vouches for.
PUBLIC_URL = url("PUBLIC_URL", schemes=("http", "https")).rstrip("/")
# The socket server's own port when it listens beside the HTTP server rather than behind the
# same address (runrelay sets it for its children): wsUrl is then the request's host at this
# port. Unset, wsUrl is the request's own host and port (a proxy that routes /ws to Daphne).
WS_PORT = whole_number("WS_PORT", 0, minimum=0, maximum=65535, unit=" (0: unset)") or None

# Where a running `runrelay` serves (http://host:port), for commands that talk to it.
SERVING_URL_FILE = VAR_DIR / "serving_url"

# The largest JSON body the API reads (DRF reads the request stream itself, so Django's
# DATA_UPLOAD_MAX_MEMORY_SIZE never applies to it). Larger bodies get 413.
API_MAX_BODY_BYTES = whole_number("API_MAX_BODY_BYTES", 64 * 1024, maximum=2**31 - 1)
