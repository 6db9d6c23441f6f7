"""What every outbox of Relay shares (webhook deliveries, Matrix messages): rows written in
the transaction of the state they report, each attempted by the worker under a lease,
retried with backoff, and re-queued by a periodic sweep when their task was lost.

An outbox model is an OutboxRow with a `status` ("pending" while it is to be tried); each
app keeps what is its own (what an attempt does, what ends a row).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta

from django.db import models, transaction
from django.db.models import Model, Q, QuerySet
from django.utils import timezone

from core import events, metrics, taskqueue

PENDING = "pending"
FIRST_RETRY = 30.0  # seconds
LONGEST_RETRY = 3600.0


class OutboxRow(models.Model):
    """The columns every outbox row has besides its own: how often it was tried, when it is
    due next, whose lease holds it, why the last attempt failed, and when it was written.
    (A subclass declares `status`, with the choices of its own outcomes.)"""

    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    lease_until = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True


def outbox_indexes(
    *,
    due_name: str,
    newest_name: str,
    in_order: list[str] | None = None,
    in_order_name: str = "",
) -> list[models.Index]:
    """The indexes of the reads an outbox makes: its pending rows in sending order, for an
    outbox whose rows go out in an order (`in_order`, then id: is an earlier row pending,
    which row is next; mail has none), its pending rows by due time (the sweep), and its
    newest rows (admin)."""
    pending = Q(status=PENDING)
    ordered = (
        [models.Index(fields=[*in_order, "id"], condition=pending, name=in_order_name)]
        if in_order
        else []
    )
    return [
        *ordered,
        models.Index(fields=["next_attempt_at"], condition=pending, name=due_name),
        models.Index(fields=["-created_at"], name=newest_name),
    ]


def register(name: str, *, model: type[Model], writer: events.OutboxWriter) -> None:
    """Make `model` an outbox (called from its app's AppConfig.ready()): `writer` sees every
    user event in the transaction that caused it (core.events), and /metrics reports the
    depth and age of its pending rows as `name`. `name` is also the channel a member of a
    shared number turns on to have `writer` see that number's events
    (events.send_to_members_on_commit)."""
    events.outbox_writer_register(writer, channel=name)
    metrics.outbox_register(name, lambda: model.objects.filter(status=PENDING))


def backoff(attempts: int) -> timedelta:
    """The wait before attempt `attempts` + 1: 30 s, 1 min, 2 min... capped at an hour, each
    within +-20% (jitter, so rows that failed together do not all come back together)."""
    seconds = min(LONGEST_RETRY, FIRST_RETRY * 2 ** max(0, attempts - 1))
    jitter = 0.8 + 0.4 * secrets.randbelow(1000) / 1000
    return timedelta(seconds=seconds * jitter)


def schedule(task, row: Model, **arguments) -> None:
    """Enqueue `task(**arguments)`, the attempt of outbox row `row`, at the row's
    next_attempt_at (at once when that has come), in the caller's transaction: the task
    exists if and only if the caller commits. `task` is the app's django-tasks task."""
    due = task
    if row.next_attempt_at > timezone.now():
        due = task.using(run_after=row.next_attempt_at)
    taskqueue.enqueue(due, **arguments)


def claim(rows: QuerySet, pk, *, lease: timedelta) -> bool:
    """Take row `pk` of `rows` for one attempt: it must be pending, due, and held by no live
    lease. Whoever gets True is the only one trying it until the lease runs out."""
    now = timezone.now()
    return bool(
        rows.filter(
            Q(lease_until__isnull=True) | Q(lease_until__lt=now),
            pk=pk,
            status=PENDING,
            next_attempt_at__lte=now,
        ).update(lease_until=now + lease)
    )


def sweep(rows: QuerySet, schedule: Callable[[Model], None], *, limit: int = 500) -> int:
    """Re-queue the pending rows of `rows` that are due by more than a minute and held by no
    lease: their task was lost. Returns how many. A duplicate task does nothing (`claim`)."""
    now = timezone.now()
    due = rows.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        status=PENDING,
        next_attempt_at__lt=now - timedelta(minutes=1),
    ).order_by("id")[:limit]
    count = 0
    with transaction.atomic():
        for row in due:
            schedule(row)
            count += 1
    return count
