from rest_framework import status

from core.errors import ErrorCode
from core.schema import operation, success_operation
from core.viewsets import ResourceViewSet
from webhooks import selectors, services
from webhooks.models import WebhookEndpoint
from webhooks.serializers import WebhookInput, WebhookOutput, WebhookWithSecretOutput

WEBHOOK_EXAMPLE = {
    "url": "https://example.com/relay-events",
    "events": ["call_status", "call_record", "incoming_call"],
    "secretId": "whs_3f9a1c2b7d4e",
    "enabled": True,
    "disabledReason": "",
    "createdAt": 1795320000000,
}
SECRET_EXAMPLE = {**WEBHOOK_EXAMPLE, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}


class WebhookViewSet(ResourceViewSet):
    # `/api/user/webhook`: where the caller's events are POSTed, signed. The actions are not
    # named after HTTP methods: DRF dispatches a method to a same-named attribute on any route,
    # so a `put` action would answer PUT on rotate-secret instead of a 405.

    input_serializers = {"set": WebhookInput}

    def _answer(self, endpoint: WebhookEndpoint, secret: str | None = None, **kwargs):
        if secret is None:
            return self.answer(WebhookOutput, endpoint, **kwargs)
        endpoint.secret = secret
        return self.answer(WebhookWithSecretOutput, endpoint, **kwargs)

    @operation(
        "webhook_get",
        summary="Show your webhook (never its secret)",
        responses={200: (WebhookOutput, WEBHOOK_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    def show(self, request):
        endpoint = selectors.webhook_access(user=request.user)
        return self._answer(endpoint)

    @operation(
        "webhook_set",
        summary="Set your webhook: where your events are POSTed, signed",
        description="201 with the `secret` when this makes the webhook (it is shown only "
        "then); 200 without it when it changes one. Re-enables a disabled webhook. 400 for "
        "a URL that leads to a private or local address.",
        request=(WebhookInput, {"url": WEBHOOK_EXAMPLE["url"], "events": ["call_status"]}),
        responses={
            201: (WebhookWithSecretOutput, SECRET_EXAMPLE),
            200: (WebhookOutput, WEBHOOK_EXAMPLE),
        },
        errors=[ErrorCode.INVALID_REQUEST],
    )
    def set(self, request):
        data = self.validated()
        endpoint, secret = services.webhook_set(
            user=request.user, url=data["url"], events=data.get("events", [])
        )
        created = secret is not None
        return self._answer(
            endpoint, secret, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )

    @success_operation(
        "webhook_delete",
        summary="Remove your webhook and its secret",
        errors=[ErrorCode.NOT_FOUND],
    )
    def remove(self, request):
        services.webhook_delete(user=request.user)
        return self.succeeded()

    @operation(
        "webhook_rotate_secret",
        summary="Replace your webhook's secret",
        description="The new secret is in the answer, and only there; from now on it signs "
        "every delivery.",
        responses={200: (WebhookWithSecretOutput, SECRET_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    def rotate(self, request):
        endpoint, secret = services.webhook_secret_rotate(user=request.user)
        return self._answer(endpoint, secret)
