from rest_framework import serializers

from core.fields import StrictIntegerField


class ChallengeOutput(serializers.Serializer):
    a = serializers.IntegerField()
    b = serializers.IntegerField()
    question = serializers.CharField(help_text='"<a> + <b> = ?"')
    challengeId = serializers.UUIDField(source="id")  # noqa: N815


class VerifyInput(serializers.Serializer):
    a = StrictIntegerField()
    b = StrictIntegerField()
    answer = StrictIntegerField()
    challengeId = serializers.UUIDField(required=False, allow_null=True)  # noqa: N815


class TokenOutput(serializers.Serializer):
    token = serializers.UUIDField(help_text="Single use, valid 10 minutes.")
