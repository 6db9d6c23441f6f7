"""The reads of webhooks that are more than a filter."""

from accounts import apikeys
from core.errors import NotFound
from core.fields import represent
from realtime.models import CallRequest
from webhooks.models import WebhookEndpoint
from webhooks.serializers import WebhookOutput


def webhook_secret(endpoint: WebhookEndpoint) -> str:
    """The endpoint's `whsec_` secret, decrypted; "" when no configured Fernet key opens it."""
    return apikeys.decrypt(endpoint.secret_encrypted) or ""


def webhook_of(*, user) -> WebhookEndpoint | None:
    """The user's webhook, or None when they have none (an endpoint without a URL is none)."""
    return WebhookEndpoint.objects.filter(user=user).exclude(url="").first()


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
        CallRequest.objects.filter(
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
