"""What Relay counts for `/metrics` (relay/metrics.py serves it), in Prometheus' own client.

The metrics below are counted where things happen, in whichever process that is: gunicorn's
workers (requests), Daphne's processes (sockets, acks), the worker and the SIP agents (calls
ending). Under runrelay every process writes them to files in PROMETHEUS_MULTIPROC_DIR and
the scrape sums them (prometheus_client's multiprocess mode); a process on its own (a test,
`manage.py runserver`) keeps them in memory. What is better read off the database at scrape
time, exact whatever process died (outbox depth and age, worker lag), is not here: apps name
their outboxes with `outbox_register` and relay/metrics.py asks them when scraped.

Labels only ever take values from a closed set (a route's name, a status, a method from
HTTP's list), never from what a client sent, so no client can grow the series.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet
from prometheus_client import Counter, Gauge, Histogram

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

http_requests = Counter(
    "relay_http_requests",
    "HTTP requests answered, by route (the URL pattern's name), method and status.",
    ["route", "method", "status"],
)
http_request_seconds = Histogram(
    "relay_http_request_duration_seconds",
    "Time from a request reaching Django to its response, by route and method.",
    ["route", "method"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
websocket_connections = Gauge(
    "relay_websocket_connections",
    "WebSocket connections open now (accepted and authenticated).",
    multiprocess_mode="livesum",
)
websocket_refused = Counter(
    "relay_websocket_refused",
    "WebSocket upgrades refused before accept, by reason.",
    ["reason"],
)
call_acks = Counter(
    "relay_call_acks",
    "Calls acked as queued (a repeated callId's ack too), by the way they came in.",
    ["via"],
)
call_submit_batch_size = Histogram(
    "relay_call_submit_batch_size",
    "Call frames written together in one transaction by a Daphne process "
    "(realtime.consumers.SubmitBatcher): 1 while it is quiet, more under load.",
    buckets=(1, 2, 5, 10, 20, 50, 100),
)
call_status_dropped = Counter(
    "relay_call_status_dropped",
    "call_status frames a socket did not send: not above the last `seq` it sent of that call "
    "(a later event of the call had reached it first).",
)
calls_ended = Counter(
    "relay_calls_ended",
    "Outbound calls that reached their terminal state, by that state.",
    ["status"],
)
inbound_calls = Counter(
    "relay_inbound_calls",
    "Inbound calls recorded, by status (answered, missed, blocked).",
    ["status"],
)
dial_refusals = Counter(
    "relay_dial_refusals",
    "Calls refused by the dialing policy, by reason (country, premium_rate, shared_cost, "
    "uan, personal_number, pager).",
    ["reason"],
)
quota_refusals = Counter(
    "relay_quota_refusals",
    "Calls refused by a plan quota, by quota (calls_per_day, call_seconds_per_day, "
    "concurrent_calls).",
    ["quota"],
)
speech_early_transcripts = Counter(
    "relay_speech_early_transcripts",
    "Speech gathers' transcriptions begun while the caller was quiet, before the utterance "
    "ended: used (the utterance ended there) or dropped (the caller spoke again, or the "
    "gather ended otherwise).",
    ["outcome"],
)
users_flagged = Counter(
    "relay_users_flagged",
    "Users flagged for fraud review: FRAUD_FLAG_REFUSALS_PER_HOUR refusals within an hour.",
)


def http_request_observe(*, route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in HTTP_METHODS else "other"
    http_requests.labels(route, method, str(status)).inc()
    http_request_seconds.labels(route, method).observe(seconds)


def count_on_commit(counter: Counter, *labels: str) -> None:
    """Count one of `counter` once the caller's transaction commits (never a rolled-back
    state); at once outside a transaction."""
    transaction.on_commit(counter.labels(*labels).inc, robust=True)


# --- outboxes, read at scrape time ---------------------------------------------------------
@dataclass(frozen=True)
class Outbox:
    name: str
    pending: Callable[[], QuerySet]  # rows still to send
    created_field: str = "created_at"


_outboxes: dict[str, Outbox] = {}


def outbox_register(name: str, pending: Callable[[], QuerySet], created_field="created_at"):
    """Report `name`'s depth (rows of `pending()`) and the age of its oldest row on
    /metrics. Apps register theirs in AppConfig.ready()."""
    _outboxes[name] = Outbox(name, pending, created_field)


def outboxes() -> list[Outbox]:
    return sorted(_outboxes.values(), key=lambda outbox: outbox.name)
