from rest_framework import serializers

from core.fields import (
    AliasField,
    CallerNumberField,
    GreetingField,
    MillisecondsField,
    PinField,
    StrictCharField,
)


class NumberOutput(serializers.Serializer):
    id = serializers.UUIDField()
    number = serializers.CharField(help_text="E.164, assigned by the service.")
    alias = serializers.CharField()
    created_at = MillisecondsField()
    greeting = serializers.CharField(
        help_text="What voicemail says to callers; empty: the service's default greeting."
    )


class NumberListOutput(serializers.Serializer):
    numbers = NumberOutput(many=True)


class NumberCreateInput(serializers.Serializer):
    alias = AliasField()
    pin = PinField(help_text="4 to 8 digits.")
    captchaToken = StrictCharField(max_length=64, help_text="uuid from /api/captcha/verify")  # noqa: N815


class AliasInput(serializers.Serializer):
    alias = AliasField()


class GreetingInput(serializers.Serializer):
    greeting = GreetingField(help_text="0 to 500 characters; empty restores the default.")


class PinChangeInput(serializers.Serializer):
    # A current PIN in the wrong format is a wrong PIN: 403, and counted towards the lock.
    currentPin = PinField(checked=False)  # noqa: N815
    newPin = PinField()  # noqa: N815


class BlockedCallerInput(serializers.Serializer):
    caller_num = CallerNumberField(max_length=64)


class BlockedCallerOutput(serializers.Serializer):
    caller_num = serializers.CharField()
    created_at = MillisecondsField()


class BlocklistOutput(serializers.Serializer):
    blocked = BlockedCallerOutput(many=True)
