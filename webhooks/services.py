"""Every write of webhooks: the endpoint and its secret, the outbox rows, and their delivery.

Deliveries are outbox rows (WebhookDelivery) written by `webhook_outbox_write` inside the
transaction of the event they carry (core.events calls it), and sent after commit by the
worker (webhooks.tasks): in order per call and URL, retried with exponential backoff and
jitter for WEBHOOK_RETRY_HOURS, after which the delivery is given up and, for the user's own
endpoint, the webhook is disabled with the reason shown on GET.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from accounts import apikeys
from accounts.models import User
from core import outbox
from core.errors import InvalidRequest, NotFound
from core.urls import AddressRefused, Unresolvable, resolve
from realtime.models import CallRequest
from webhooks import delivery
from webhooks.models import EVENT_TYPES, DeliveryStatus, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)  # longer than one attempt can take (timeouts: 3 s + 5 s)


# --- the endpoint --------------------------------------------------------------------------
def _new_secret() -> tuple[str, str]:
    """A `whsec_` secret (32 random bytes, base64) and its public id."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    return secret, "whs_" + secrets.token_hex(6)


def webhook_secret(endpoint: WebhookEndpoint) -> str:
    return apikeys.decrypt(endpoint.secret_encrypted) or ""


def _check_destination(url: str) -> None:
    """InvalidRequest when `url` leads to a private or local address (unless allowed): checked
    when it is set, and again at every delivery. A host that does not resolve yet is accepted
    (its DNS may be on its way); each delivery to it fails, and is retried, until it does."""
    try:
        resolve(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
    except Unresolvable:
        return
    except AddressRefused as refused:
        raise InvalidRequest(
            f"url: {refused}.", fields={"url": [f"{refused}; webhooks go to public addresses."]}
        ) from None


def _endpoint_for(user: User) -> tuple[WebhookEndpoint, str | None]:
    """The user's endpoint, made (with a fresh secret, returned once) if they had none."""
    endpoint = WebhookEndpoint.objects.filter(user=user).first()
    if endpoint is not None:
        return endpoint, None
    secret, secret_id = _new_secret()
    endpoint = WebhookEndpoint.objects.create(
        user=user, secret_encrypted=apikeys.encrypt(secret), secret_id=secret_id
    )
    return endpoint, secret


def webhook_set(*, user: User, url: str, events: list[str]) -> tuple[WebhookEndpoint, str | None]:
    """Point the user's webhook at `url` for `events` (all when empty), enabled. Returns the
    endpoint and its secret when this made it (it is never shown again), else None.
    InvalidRequest for a URL that leads to a private or local address."""
    _check_destination(url)
    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).exists()  # one endpoint per user
        endpoint, secret = _endpoint_for(user)
        endpoint.url, endpoint.events = url, list(events) or list(EVENT_TYPES)
        endpoint.enabled, endpoint.disabled_reason, endpoint.failing_since = True, "", None
        endpoint.save(
            update_fields=["url", "events", "enabled", "disabled_reason", "failing_since"]
        )
    return endpoint, secret


def webhook_secret_rotate(*, user: User) -> tuple[WebhookEndpoint, str]:
    """A new secret for the user's webhook (the old one signs nothing from now on)."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().filter(user=user).first()
        if endpoint is None:
            raise NotFound()
        secret, endpoint.secret_id = _new_secret()
        endpoint.secret_encrypted = apikeys.encrypt(secret)
        endpoint.save(update_fields=["secret_encrypted", "secret_id"])
    return endpoint, secret


def webhook_delete(*, user: User) -> None:
    """Remove the user's webhook and its secret; deliveries not yet sent are dropped."""
    with transaction.atomic():
        if not WebhookEndpoint.objects.filter(user=user).delete()[0]:
            raise NotFound()
        WebhookDelivery.objects.filter(user=user, status=DeliveryStatus.PENDING).delete()


# --- the outbox ----------------------------------------------------------------------------
def webhook_outbox_write(*, events: list[tuple]) -> None:
    """core.events' outbox writer: a delivery per URL that wants each event, in the caller's
    transaction, each with its task. The user's webhook takes the event types it names;
    a call's statusCallback takes that call's call_status. Whatever the number of events,
    two reads: the users' webhooks and the calls' statusCallbacks."""
    wanted = [
        (str(user_id), event) for user_id, event in events if event.get("type") in EVENT_TYPES
    ]
    if not wanted:
        return
    endpoints = {
        str(endpoint.user_id): endpoint
        for endpoint in WebhookEndpoint.objects.filter(
            user_id__in={user_id for user_id, _ in wanted}, enabled=True
        )
    }
    callbacks = _status_callbacks(
        [(user_id, event["callId"]) for user_id, event in wanted if event["type"] == "call_status"]
    )
    rows = []
    for user_id, event in wanted:
        kind = event["type"]
        endpoint = endpoints.get(user_id)
        urls = []
        if endpoint is not None and endpoint.url and kind in endpoint.events:
            urls.append(endpoint.url)
        if kind == "call_status":
            callback = callbacks.get((user_id, event["callId"]))
            if callback and callback not in urls:
                urls.append(callback)
        if not urls:
            continue
        if kind == "call_status":
            key = f"call:{event['callId']}"[:120]
        else:
            key = f"{kind}:{secrets.token_hex(8)}"  # nothing to keep in order with
        body = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        about = {"user_id": user_id, "ordering_key": key, "event_type": kind, "payload": body}
        rows += [WebhookDelivery(url=url, **about) for url in urls]
    for row in WebhookDelivery.objects.bulk_create(rows):
        schedule_delivery(row)


def _status_callbacks(calls: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The statusCallback of each (owner id, callId) that has one."""
    if not calls:
        return {}
    rows = (
        CallRequest.objects.filter(
            owner_id__in={owner for owner, _ in calls}, call_id__in={call for _, call in calls}
        )
        .exclude(status_callback="")
        .values_list("owner_id", "call_id", "status_callback")
    )
    return {(str(owner), call_id): callback for owner, call_id, callback in rows}


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
    secret = webhook_secret(endpoint) if endpoint is not None else ""
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


def delivery_retry(*, row: WebhookDelivery) -> None:
    """Staff: send a delivery again now (a given-up one too), and re-enable its webhook."""
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=row.pk).update(
            status=DeliveryStatus.PENDING, next_attempt_at=timezone.now(), lease_until=None
        )
        WebhookEndpoint.objects.filter(user_id=row.user_id, url=row.url).update(
            enabled=True, disabled_reason="", failing_since=None
        )
        row.refresh_from_db()
        schedule_delivery(row)


def deliveries_sweep() -> int:
    """Re-queue pending deliveries that are due (by more than a minute) and not held: their
    task was lost. Returns how many were re-queued. A duplicate task does nothing."""
    return outbox.sweep(WebhookDelivery.objects, schedule_delivery)


# --- the worker's side ---------------------------------------------------------------------
@task()
def deliver_webhook(delivery_id: int) -> None:
    delivery_attempt(delivery_id=delivery_id)


def schedule_delivery(row: WebhookDelivery) -> None:
    """Enqueue `row`'s attempt at its next_attempt_at, in the caller's transaction."""
    due = deliver_webhook
    if row.next_attempt_at > timezone.now():
        due = deliver_webhook.using(run_after=row.next_attempt_at)
    due.enqueue(delivery_id=row.pk)
