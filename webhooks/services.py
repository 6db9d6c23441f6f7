"""Every write of webhooks asked for by a user, staff or core.events: the endpoint and its
secret, and the outbox rows, each written with its task.

Deliveries are outbox rows (WebhookDelivery) written by `webhook_outbox_write` inside the
transaction of the event they carry (core.events calls it), and sent after commit by the
worker (webhooks.tasks): in order per call and URL, retried with exponential backoff and
jitter for WEBHOOK_RETRY_HOURS, after which the delivery is given up and, for the user's own
endpoint, the webhook is disabled with the reason shown on GET.
"""

from __future__ import annotations

import base64
import json
import secrets

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import apikeys
from accounts.models import User
from calls.models import Call
from core import outbox
from core.errors import InvalidRequest, NotFound
from core.urls import destination_problem
from webhooks import selectors
from webhooks.models import (
    EVENT_TYPES,
    IMPLIED_BY,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
)
from webhooks.tasks import schedule_delivery


# --- the endpoint --------------------------------------------------------------------------
def _new_secret() -> tuple[str, str]:
    """A `whsec_` secret (32 random bytes, base64) and its public id."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    return secret, "whs_" + secrets.token_hex(6)


def _check_destination(url: str) -> None:
    """InvalidRequest when `url` leads to a private or local address (unless allowed): checked
    when it is set, and again at every delivery. A host that does not resolve yet is accepted
    (its DNS may be on its way); each delivery to it fails, and is retried, until it does."""
    problem = destination_problem(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
    if problem:
        raise InvalidRequest(
            f"url: {problem}.", fields={"url": [f"{problem}; webhooks go to public addresses."]}
        )


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
def webhook_outbox_write(
    *,
    events: list[tuple],
    rows: list | None = None,
    owned: dict | None = None,
    shared: bool = False,
) -> None:
    """core.events' outbox writer: a delivery per URL that wants each event, in the caller's
    transaction, each with its task. The user's webhook takes the event types it names, a
    shared number's (`shared`: the user is its member and turned their webhook on for it)
    as their own numbers';
    a call's statusCallback takes that call's call_status. Whatever the number of events,
    at most two reads: the users' webhooks (none when the sender read them with the users:
    `owned`, selectors.webhook_column), and the statusCallbacks of the calls whose row the
    sender did not hand over (`rows`: the Call of a call_status, or None)."""
    rows = rows or [None] * len(events)
    wanted = [
        (str(user_id), event, row)
        for (user_id, event), row in zip(events, rows, strict=True)
        if event.get("type") in EVENT_TYPES
    ]
    if not wanted:
        return
    endpoints = _endpoints_of({user_id for user_id, _, _ in wanted}, owned or {})
    callbacks = {
        (user_id, row.call_id): row.status_callback
        for user_id, event, row in wanted
        if event["type"] == "call_status" and isinstance(row, Call)
    }
    callbacks |= selectors.status_callbacks(
        [
            (user_id, event["callId"])
            for user_id, event, row in wanted
            if event["type"] == "call_status" and not isinstance(row, Call)
        ]
    )
    deliveries = []
    for user_id, event, _ in wanted:
        kind = event["type"]
        endpoint = endpoints.get(user_id)
        urls = []
        if endpoint is not None and endpoint[0] and _takes(endpoint[1], kind):
            urls.append(endpoint[0])
        if kind == "call_status":
            callback = callbacks.get((user_id, event["callId"]))
            if callback and callback not in urls:
                urls.append(callback)
        if not urls:
            continue
        if kind == "call_status":
            key = f"call:{event['callId']}"[:120]
        elif kind in ("call_record", "call_record.transcribed"):
            key = f"record:{event['id']}"  # the transcript after its record
        elif kind == "recording.completed":
            key = f"record:{event['call']}"  # after its call's record
        else:
            key = f"{kind}:{secrets.token_hex(8)}"  # nothing to keep in order with
        body = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        about = {"user_id": user_id, "ordering_key": key, "event_type": kind, "payload": body}
        deliveries += [WebhookDelivery(url=url, **about) for url in urls]
    for delivery in WebhookDelivery.objects.bulk_create(deliveries):
        schedule_delivery(delivery)


def _takes(events: list, kind: str) -> bool:
    return kind in events or IMPLIED_BY.get(kind) in events


def _endpoints_of(user_ids: set[str], owned: dict) -> dict[str, tuple[str, list]]:
    """(url, events) of each of these users' enabled webhooks: from `owned` where the sender
    read them with the users, else read."""
    column = owned.get(selectors.OWNER_COLUMN, {})
    endpoints = {
        user_id: selectors.webhook_from_column(column[user_id])
        for user_id in user_ids
        if user_id in column
    }
    unread = user_ids - endpoints.keys()
    if unread:
        endpoints |= {
            str(user_id): (url, events)
            for user_id, url, events in WebhookEndpoint.objects.filter(
                user_id__in=unread, enabled=True
            ).values_list("user_id", "url", "events")
        }
    return {user_id: endpoint for user_id, endpoint in endpoints.items() if endpoint}


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


def webhook_erase(*, user: User) -> None:
    """Account deletion (core.userdata): the user's webhook, its secret and every delivery
    (sent or not: none leaves once the deletion commits). Inside the deletion's
    transaction."""
    WebhookEndpoint.objects.filter(user=user).delete()
    WebhookDelivery.objects.filter(user=user).delete()
