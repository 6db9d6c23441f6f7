"""gunicorn's threaded worker (gthread), stamping each request with when it reached the
worker: the WSGI environ's `relay.arrived_at` (time.monotonic()), read by relay/admission.py
so that a request's wait for a hashing slot counts from then (core.passwords).

gthread hands every connection that is ready to one queue in front of its threads; under a
flood of logins a request can wait there for seconds before Django sees it. Without the stamp
that wait was invisible to PASSWORD_HASH_WAIT_SECONDS (docs/benchmarks.md, http_logins).
"""

from __future__ import annotations

import threading
import time

from gunicorn.workers.gthread import ThreadWorker

ARRIVED_AT = "relay.arrived_at"


class RelayThreadWorker(ThreadWorker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._serving = threading.local()  # the connection each thread serves, its stamp

    def enqueue_req(self, conn) -> None:
        # Every way a request reaches the threads' queue comes through here: a new
        # connection, a kept-alive one that turned readable, one deferred for slow data.
        conn.relay_arrived_at = time.monotonic()
        super().enqueue_req(conn)

    def handle(self, conn):
        self._serving.arrived_at = getattr(conn, "relay_arrived_at", None)
        return super().handle(conn)

    def handle_http2(self, conn):
        # One connection carries many streams over its life: its stamp dates none of them.
        self._serving.arrived_at = None
        return super().handle_http2(conn)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        application, serving = self.wsgi, self._serving

        def stamped(environ, start_response):
            environ[ARRIVED_AT] = getattr(serving, "arrived_at", None)
            return application(environ, start_response)

        self.wsgi = stamped
