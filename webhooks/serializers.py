from rest_framework import serializers

from core.fields import MillisecondsField, WebhookUrlField
from webhooks.models import EVENT_TYPES


class WebhookInput(serializers.Serializer):
    url = WebhookUrlField(help_text="http or https; a public address")
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENT_TYPES),
        required=False,
        max_length=len(EVENT_TYPES),
        help_text="which events to send; default: all",
    )


class WebhookOutput(serializers.Serializer):
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_TYPES))
    secretId = serializers.CharField(source="secret_id")  # noqa: N815
    enabled = serializers.BooleanField()
    disabledReason = serializers.CharField(  # noqa: N815
        source="disabled_reason", help_text="why Relay disabled it (a day of failures)"
    )
    createdAt = MillisecondsField(source="created_at")  # noqa: N815


class WebhookWithSecretOutput(WebhookOutput):
    secret = serializers.CharField(
        help_text="whsec_...: shown only when the webhook is made and when it is rotated"
    )
