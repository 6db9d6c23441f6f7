"""The webhooks' side of the worker: the delivery task, its scheduling, and what one attempt
does. Each attempt sends one due delivery (webhooks.delivery), records the outcome, and in
the same transaction schedules its retry (backoff with jitter, for WEBHOOK_RETRY_HOURS) or
the next delivery in line for its call and URL; a day of failures disables the user's own
endpoint. The rows are written by webhooks.services.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from core import outbox
from webhooks import delivery, selectors
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)  # longer than one attempt can take (timeouts: 3 s + 5 s)


@task()
def deliver_webhook(delivery_id: int) -> None:
    delivery_attempt(delivery_id=delivery_id)


def schedule_delivery(row: WebhookDelivery) -> None:
    """Enqueue `row`'s attempt at its next_attempt_at, in the caller's transaction."""
    outbox.schedule(deliver_webhook, row, delivery_id=row.pk)


def _earlier_pending(row: WebhookDelivery) -> bool:
    return WebhookDelivery.objects.filter(
        url=row.url, ordering_key=row.ordering_key, status=DeliveryStatus.PENDING, id__lt=row.id
    ).exists()


def delivery_attempt(*, delivery_id: int) -> WebhookDelivery | None:
    """Send one due delivery, unless an earlier one of the same call and URL is still
    pending (that one sends this after itself) or another worker holds it. Records the
    outcome; schedules the retry or the next in line. Returns the row when it was tried."""
    if not outbox.claim(WebhookDelivery.objects, delivery_id, lease=LEASE):
        return None
    row = WebhookDelivery.objects.get(pk=delivery_id)
    if _earlier_pending(row):
        WebhookDelivery.objects.filter(pk=row.pk).update(lease_until=None)
        return None
    endpoint = WebhookEndpoint.objects.filter(user_id=row.user_id).first()
    secret = selectors.webhook_secret(endpoint) if endpoint is not None else ""
    if not secret:
        outcome = delivery.Attempt(delivered=False, error="the webhook's secret is gone")
    else:
        outcome = delivery.post(
            url=row.url, body=row.payload, secret=secret, webhook_id=str(row.webhook_id)
        )
    _record_outcome(row, endpoint, outcome)
    return row


def _record_outcome(row: WebhookDelivery, endpoint, outcome: delivery.Attempt) -> None:
    now = timezone.now()
    with transaction.atomic():
        row.attempts += 1
        row.response_status, row.last_error, row.lease_until = outcome.status, outcome.error, None
        own = endpoint is not None and row.url == endpoint.url
        if outcome.delivered:
            row.status, row.delivered_at = DeliveryStatus.DELIVERED, now
            if own and endpoint.failing_since is not None:
                WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=None)
        elif now - row.created_at >= timedelta(hours=settings.WEBHOOK_RETRY_HOURS):
            row.status = DeliveryStatus.FAILED
        else:
            row.next_attempt_at = now + outbox.backoff(row.attempts)
        row.save(
            update_fields=[
                "attempts",
                "response_status",
                "last_error",
                "lease_until",
                "status",
                "delivered_at",
                "next_attempt_at",
            ]
        )
        if not outcome.delivered and own:
            _note_failure(endpoint, row, now)
        if row.status == DeliveryStatus.PENDING:
            schedule_delivery(row)
        else:
            following = (
                WebhookDelivery.objects.filter(
                    url=row.url, ordering_key=row.ordering_key, status=DeliveryStatus.PENDING
                )
                .order_by("id")
                .first()
            )
            if following is not None:
                schedule_delivery(following)


def _note_failure(endpoint: WebhookEndpoint, row: WebhookDelivery, now) -> None:
    """A day of failures disables the webhook, with the reason shown on GET."""
    since = endpoint.failing_since or now
    if endpoint.failing_since is None:
        WebhookEndpoint.objects.filter(pk=endpoint.pk, failing_since=None).update(failing_since=now)
    if now - since >= timedelta(hours=settings.WEBHOOK_RETRY_HOURS):
        reason = (
            f"every delivery failed for {settings.WEBHOOK_RETRY_HOURS} h; last: {row.last_error}"
        )
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            enabled=False, disabled_reason=reason[:300]
        )
        logger.warning("webhook of user %s disabled after a day of failures", endpoint.user_id)
