from django.urls import path

from webhooks.views import WebhookViewSet

urlpatterns = [
    path(
        "user/webhook",
        WebhookViewSet.as_view({"get": "show", "put": "set", "delete": "remove"}),
        name="webhook",
    ),
    path(
        "user/webhook/rotate-secret",
        WebhookViewSet.as_view({"post": "rotate"}),
        name="webhook-rotate-secret",
    ),
]
