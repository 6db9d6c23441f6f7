"""`GET /metrics`: Prometheus' text format, for a scraper holding METRICS_TOKEN.

Unset, the endpoint does not exist (404, like any unknown path). Set, it wants
`Authorization: Bearer <METRICS_TOKEN>`, compared in constant time; anything else is a 401.
Failed attempts count against a per-address limit, so the token cannot be guessed at speed.

What it shows: the counters every process keeps (core.metrics; summed over the processes
through PROMETHEUS_MULTIPROC_DIR when runrelay set it) and, read off the database now, each
outbox's depth and the age of its oldest row, and the worker's lag: how long the oldest due
task has waited; read off the disk, the speech cache's size.
"""

from __future__ import annotations

import hmac
import logging
import os

from django.conf import settings
from django.db.models import Min
from django.http import HttpResponse
from django.utils import timezone
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult, get_date_max
from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from core import metrics, ratelimit
from core.clientip import client_ip
from core.errors import ApplicationError, ErrorCode, NotFound
from telephony import speech

logger = logging.getLogger("relay.security")

FAILED_ATTEMPTS_RATE = "10/m"


class DatabaseCollector:
    """Gauges read at scrape time: each outbox's depth and oldest row, the worker's lag."""

    def collect(self):
        now = timezone.now()
        depth = GaugeMetricFamily(
            "relay_outbox_pending", "Rows of an outbox not yet sent.", labels=["outbox"]
        )
        age = GaugeMetricFamily(
            "relay_outbox_oldest_pending_age_seconds",
            "Age of an outbox's oldest row not yet sent (0 when it is empty).",
            labels=["outbox"],
        )
        for outbox in metrics.outboxes():
            pending = outbox.pending()
            found = pending.aggregate(oldest=Min(outbox.created_field))
            depth.add_metric([outbox.name], pending.count())
            oldest = found["oldest"]
            age.add_metric([outbox.name], (now - oldest).total_seconds() if oldest else 0.0)
        yield depth
        yield age
        ready = DBTaskResult.objects.filter(status=TaskResultStatus.READY)
        unscheduled = ready.filter(run_after=get_date_max())  # due since they were enqueued
        scheduled = ready.filter(run_after__lte=now).exclude(run_after=get_date_max())
        since = [
            unscheduled.aggregate(at=Min("enqueued_at"))["at"],
            scheduled.aggregate(at=Min("run_after"))["at"],
        ]
        oldest_due = min((at for at in since if at is not None), default=None)
        lag = GaugeMetricFamily(
            "relay_worker_lag_seconds",
            "How long the oldest task that is due has waited for a worker (0: none waits).",
        )
        lag.add_metric([], max(0.0, (now - oldest_due).total_seconds()) if oldest_due else 0.0)
        yield lag
        due = GaugeMetricFamily("relay_tasks_due", "Tasks due and waiting for a worker.")
        due.add_metric([], unscheduled.count() + scheduled.count())
        yield due


class SpeechCacheCollector:
    """The speech cache's size on this host, read at scrape time (TTS_CACHE_MAX_MB bounds
    it: purge_expired)."""

    def collect(self):
        size, messages = speech.cache_usage(settings.TTS_CACHE_DIR)
        used = GaugeMetricFamily("relay_tts_cache_bytes", "Bytes the speech cache holds.")
        used.add_metric([], size)
        yield used
        held = GaugeMetricFamily("relay_tts_cache_messages", "Messages the speech cache holds.")
        held.add_metric([], messages)
        yield held


class _ThisProcess:
    """The default registry's metrics, for a process that keeps them in memory."""

    def collect(self):
        return REGISTRY.collect()


def scrape(accept: str) -> tuple[bytes, str]:
    """The exposition in the format the scraper accepts (Prometheus' text or OpenMetrics),
    and its content type."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(DatabaseCollector())
    registry.register(SpeechCacheCollector())
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type


def _authorized(request) -> bool:
    scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not presented:
        return False
    # surrogateescape: whatever bytes were sent compare, in constant time, as bytes.
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), settings.METRICS_TOKEN.encode()
    )


def metrics_view(request):
    if not settings.METRICS_TOKEN:
        return NotFound().as_response()
    if not _authorized(request):
        ip = client_ip(request)
        try:
            ratelimit.hit("metrics-auth", ip, FAILED_ATTEMPTS_RATE)
        except ApplicationError as limited:
            return limited.as_response()
        logger.warning("metrics refused: %s (from %s)", "bad token", ip)
        refused = ApplicationError(
            "GET /metrics wants Authorization: Bearer <METRICS_TOKEN>.",
            code=ErrorCode.AUTHENTICATION_FAILED,
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
        return refused.as_response()
    body, content_type = scrape(request.META.get("HTTP_ACCEPT", ""))
    return HttpResponse(body, content_type=content_type)
