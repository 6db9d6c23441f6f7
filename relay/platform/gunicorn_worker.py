"""gunicorn's threaded worker (gthread), stamping each request with when it reached the
worker, and giving the requests that hash a password threads of their own.

The stamp: the WSGI environ's `relay.arrived_at` (time.monotonic()), read by
relay/admission.py so that a request's wait for a hashing slot counts from then
(core.passwords). gthread hands every connection that is ready to one queue in front of its
threads; under a flood of logins a request can wait there for seconds before Django sees it.
Without the stamp that wait was invisible to PASSWORD_HASH_WAIT_SECONDS (docs/benchmarks.md,
http_logins).

The threads of their own: the worker reads a request's first line as it hands the connection
on (peeked, left in the socket for gunicorn to parse), and a request to a view that hashes
(the WSGI application's `hashes`, relay/admission.py) goes to a pool of PASSWORD_HASH_THREADS
threads plus SPARE_HASHING_THREADS, everything else to a pool of the rest (HTTP_THREADS).
Under a flood of logins, /me no longer waits in one queue behind the flood's connections,
each to be read and refused (docs/decisions.md, "A login flood that slows nobody else"). The
spare threads answer the refusals at once while the hashing threads wait their turn; a thread
of that pool closes its database connection after each request, so the worker's connections
stay at most HTTP_THREADS + PASSWORD_HASH_THREADS (a login pays a connection's opening,
next to a hash's 20 ms). A request
whose first line cannot be read yet (a client still sending it), and every request of a worker
that speaks TLS itself, goes to the rest's pool: admission still bounds what hashes there.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from concurrent import futures
from functools import partial

from django.conf import settings
from django.db import connections
from gunicorn.workers.gthread import ThreadWorker

ARRIVED_AT = "relay.arrived_at"
# Beyond PASSWORD_HASH_THREADS (which admission lets hash at once): these answer the refusals
# of a flood at once, never waiting behind the requests that wait for a hashing slot.
SPARE_HASHING_THREADS = 2
# What is peeked at: the request line, up to gunicorn's limit of it (relay/gunicorn_conf.py).
PEEK_BYTES = 8192


class RelayThreadWorker(ThreadWorker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._serving = threading.local()  # the connection each thread serves, its stamp
        self.hashing_pool: futures.ThreadPoolExecutor | None = None
        self._hashes = None  # the application's hashes(method, path), once loaded

    def get_thread_pool(self) -> futures.ThreadPoolExecutor:
        hashing = settings.PASSWORD_HASH_THREADS
        if self.cfg.is_ssl or not 0 < hashing < self.cfg.threads:
            return super().get_thread_pool()  # one pool: no request line to read before TLS
        self.hashing_pool = futures.ThreadPoolExecutor(
            max_workers=hashing + SPARE_HASHING_THREADS, thread_name_prefix="hashing"
        )
        return futures.ThreadPoolExecutor(max_workers=self.cfg.threads - hashing)

    def enqueue_req(self, conn) -> None:
        # Every way a request reaches the threads comes through here: a new connection, a
        # kept-alive one that turned readable, one deferred for slow data.
        pool = self._pool_for(conn)
        if pool is None:
            self._await_request_line(conn)
            return
        conn.relay_arrived_at = time.monotonic()
        handle = self._handle_hashing if pool is self.hashing_pool else self.handle
        done = pool.submit(handle, conn)
        done.add_done_callback(lambda fut: self.method_queue.defer(self.finish_request, conn, fut))

    def _pool_for(self, conn) -> futures.ThreadPoolExecutor | None:
        """The pool for the request `conn` is about to send; None for a new connection that
        has sent nothing yet (it is read again once it has)."""
        if self.hashing_pool is None or self._hashes is None or conn.is_http2:
            return self.tpool
        try:
            head = conn.sock.recv(PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            new = not conn.initialized and not conn.data_ready
            return None if new else self.tpool
        except OSError:
            return self.tpool  # the thread meets the error and closes the connection
        line, complete, _ = head.partition(b"\r\n")
        parts = line.split(b" ")
        if not complete or len(parts) != 3:
            return self.tpool
        method = parts[0].decode("latin-1")
        path = parts[1].decode("latin-1").partition("?")[0]
        try:
            hashes = self._hashes(method, path)
        except Exception:  # noqa: BLE001 - never the main loop's end: the thread answers it
            hashes = False
        return self.hashing_pool if hashes else self.tpool

    def _await_request_line(self, conn) -> None:
        # As gthread waits for a deferred connection's data: on the poller, not in a thread.
        conn.sock.setblocking(False)
        conn.timeout = time.monotonic() + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(
            conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn)
        )

    def handle(self, conn):
        self._serving.arrived_at = getattr(conn, "relay_arrived_at", None)
        return super().handle(conn)

    def _handle_hashing(self, conn):
        # Whichever of the pool's threads a request that hashes lands on, the thread keeps no
        # database connection after it: at most PASSWORD_HASH_THREADS of them are open at once
        # (admission), as before the pool was split, not one per thread, spare ones included.
        try:
            return self.handle(conn)
        finally:
            connections.close_all()

    def handle_http2(self, conn):
        # One connection carries many streams over its life: its stamp dates none of them.
        self._serving.arrived_at = None
        return super().handle_http2(conn)

    def handle_quit(self, sig, frame) -> None:
        if self.hashing_pool is not None:
            self.hashing_pool.shutdown(wait=False)
        super().handle_quit(sig, frame)

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self.hashing_pool is not None:
                self.hashing_pool.shutdown(wait=False)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        application, serving = self.wsgi, self._serving
        self._hashes = getattr(application, "hashes", None)

        def stamped(environ, start_response):
            environ[ARRIVED_AT] = getattr(serving, "arrived_at", None)
            return application(environ, start_response)

        self.wsgi = stamped
