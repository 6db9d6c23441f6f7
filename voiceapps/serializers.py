from rest_framework import serializers

from core.fields import MillisecondsField
from voiceapps.verbs import HookUrlField, ScriptField


class VoiceAppInput(serializers.Serializer):
    # PUT /api/numbers/:id/voice: exactly one of `script` and `url` (a comment, not a
    # docstring, which the schema would publish).
    default_error_messages = {"invalid": "The body must be a JSON object."}

    script = ScriptField(required=False, help_text="a static flow, such as a menu")
    url = HookUrlField(
        required=False, help_text="each incoming call POSTs here and runs the script answered"
    )

    def validate(self, attrs):
        if ("script" in attrs) == ("url" in attrs):
            raise serializers.ValidationError(
                {"script": ["Give `script` or `url`, exactly one of the two."]}
            )
        return attrs


class VoiceAppOutput(serializers.Serializer):
    script = ScriptField(allow_null=True, help_text="null when a URL answers the calls")
    url = serializers.SerializerMethodField(help_text="null when a script answers the calls")
    updatedAt = MillisecondsField(source="updated_at")  # noqa: N815

    def get_url(self, app) -> str | None:
        return app.url or None
