"""The reads of webhooks that are more than a filter."""

import json

from django.db.models import OuterRef, Subquery
from django.db.models.functions import JSONObject

from accounts import apikeys
from calls.models import Call
from core.errors import NotFound
from core.fields import represent
from webhooks.models import WebhookEndpoint
from webhooks.serializers import WebhookOutput


def webhook_secret(endpoint: WebhookEndpoint) -> str:
    """The endpoint's `whsec_` secret, decrypted; "" when no configured Fernet key opens it."""
    return apikeys.decrypt(endpoint.secret_encrypted) or ""


def webhook_signing_secret(user_id) -> str:
    """The `whsec_` secret that signs the user's webhooks, and their calls' voice hooks; ""
    when they have none (or no configured Fernet key opens it)."""
    endpoint = WebhookEndpoint.objects.filter(user_id=user_id).only("secret_encrypted").first()
    return "" if endpoint is None else webhook_secret(endpoint)


def webhook_of(*, user) -> WebhookEndpoint | None:
    """The user's webhook, or None when they have none (an endpoint without a URL is none)."""
    return WebhookEndpoint.objects.filter(user=user).exclude(url="").first()


# The user's enabled webhook as a column of a query over users (core.events' owner column),
# so that a batch of submits reads it with its owners, not again in its transaction.
OWNER_COLUMN = "webhook"


def webhook_column() -> Subquery:
    """The user's enabled webhook, {url, events} as JSON text, or null: an expression over a
    query of users."""
    enabled = WebhookEndpoint.objects.filter(user=OuterRef("pk"), enabled=True).exclude(url="")
    return Subquery(enabled.values(value=JSONObject(url="url", events="events"))[:1])


def webhook_from_column(value) -> tuple[str, list] | None:
    """webhook_column's value as (url, events), or None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    events = value["events"]
    if isinstance(events, str):  # SQLite's json_object takes the JSON text for a string
        events = json.loads(events)
    return value["url"], events


def webhook_access(*, user) -> WebhookEndpoint:
    """The user's webhook; NotFound when they have none."""
    endpoint = webhook_of(user=user)
    if endpoint is None:
        raise NotFound()
    return endpoint


def status_callbacks(calls: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The statusCallback of each (owner id, callId) that has one."""
    if not calls:
        return {}
    rows = (
        Call.objects.filter(
            owner_id__in={owner for owner, _ in calls}, call_id__in={call for _, call in calls}
        )
        .exclude(status_callback="")
        .values_list("owner_id", "call_id", "status_callback")
    )
    return {(str(owner), call_id): callback for owner, call_id, callback in rows}


def webhook_export(*, user) -> dict:
    """The user's webhook for their export (core.userdata), as the API answers it: never its
    secret. Null when they have none."""
    endpoint = webhook_of(user=user)
    return {"webhook": None if endpoint is None else represent(WebhookOutput, endpoint)}
