"""Admission of the requests that hash a password or PIN, before Django handles them: the
WSGI application gunicorn serves wraps Django's in HashingAdmission (relay/wsgi.py).

A flood of logins is mostly refused (the hashing queue takes what fits in
PASSWORD_HASH_WAIT_SECONDS). A refusal that went through Django's middleware and DRF first
cost milliseconds of CPU each, and every other request waited behind those in the worker's
queue: here it costs the URL's resolution and a few bytes (issue 40, docs/decisions.md).
"""

from __future__ import annotations

import json
import time
from http import HTTPStatus

from django.urls import Resolver404, resolve

from core import metrics, passwords, requestid
from relay.platform.gunicorn_worker import ARRIVED_AT

# Methods that never hash: their requests are not even resolved here.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def request_hashes(method: str, path: str) -> tuple[bool, str]:
    """Whether a request of `method` to `path` reaches a view marked `hashes_passwords`, and
    the route's name (for /metrics)."""
    if method in SAFE_METHODS:
        return False, ""
    try:
        match = resolve(path)
    except Resolver404:
        return False, ""
    return passwords.view_hashes(match.func, method), match.view_name


class HashingAdmission:
    """Every request runs with its arrival at the server (gunicorn's stamp,
    relay/platform/gunicorn_worker.py) known to the hashing queue, so that its wait for a slot
    counts from then (core.passwords.request_arrived). A request to a view that hashes is admitted
    first (core.passwords.admit_hashing_request): when it already waited its whole
    PASSWORD_HASH_WAIT_SECONDS in the server's queue, or when this process has no hashing thread
    left (PASSWORD_HASH_THREADS), it is answered 503 service_unavailable with Retry-After at once,
    in Relay's error shape, with its X-Request-Id, and counted in /metrics; Django never sees it."""

    def __init__(self, application) -> None:
        self.application = application

    def hashes(self, method: str, path: str) -> bool:
        """Whether a request of `method` to `path` hashes (request_hashes): gunicorn's worker
        gives such requests threads of their own (relay/platform/gunicorn_worker.py)."""
        return request_hashes(method, path)[0]

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        method = environ.get("REQUEST_METHOD", "")
        hashes, route = request_hashes(method, environ.get("PATH_INFO", ""))
        with passwords.request_arrived(environ.get(ARRIVED_AT)):
            if hashes:
                try:
                    passwords.admit_hashing_request()
                except passwords.PasswordHashingBusy as busy:
                    response = self._refuse(busy, environ, start_response)
                    metrics.http_request_observe(
                        route=route,
                        method=method,
                        status=busy.status,
                        seconds=time.perf_counter() - started,
                    )
                    return response
            # Django's response is whole when this returns (no view that hashes streams).
            return self.application(environ, start_response)

    def _refuse(self, busy: passwords.PasswordHashingBusy, environ, start_response) -> list:
        body = json.dumps(busy.as_body()).encode()
        status = HTTPStatus(busy.status)
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Request-Id", requestid.accept(environ.get("HTTP_X_REQUEST_ID"))),
            *busy.headers.items(),
        ]
        start_response(f"{status.value} {status.phrase}", headers)
        return [body]
