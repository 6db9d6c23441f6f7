from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import (
    AliasField,
    CallerNumberField,
    DialableNumberField,
    GreetingField,
    MillisecondsField,
    PinField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from core.webrtc import BROWSER
from virtual_numbers.models import (
    FORWARD_RING_SECONDS,
    FORWARD_RING_SECONDS_DEFAULT,
    FORWARD_TARGETS_MAX,
    ForwardCallerId,
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


class GreetingOutput(serializers.Serializer):
    active = serializers.ChoiceField(
        choices=["recorded", "text", "default"],
        help_text="What callers hear: `recorded` (the greeting recorded by phone), `text` "
        "(`greeting`, spoken) or `default` (the service's default greeting, spoken).",
    )
    greeting = serializers.CharField(
        help_text="The text greeting (empty: the default), spoken when nothing is recorded."
    )
    recording_url = serializers.CharField(
        allow_null=True,
        help_text="The recorded greeting (GET it for audio/wav), a path of this API; null: none.",
    )
    recording_seconds = serializers.FloatField(
        allow_null=True, help_text="The recorded greeting's length; null: none."
    )


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


@extend_schema_field({"type": "string", "pattern": r"^(\+[1-9]\d{6,14}|browser)$"})
class ForwardTargetField(DialableNumberField):
    """A forwarding target: a number Relay may dial, or "browser" (the owner's console tabs
    whose phone is on, issue 43)."""

    def to_internal_value(self, data):
        if data == BROWSER:
            return BROWSER
        return super().to_internal_value(data)


class ForwardingInput(serializers.Serializer):
    targets = serializers.ListField(
        child=ForwardTargetField(),
        min_length=1,
        max_length=FORWARD_TARGETS_MAX,
        error_messages={
            "min_length": "Give at least one number to ring.",
            "max_length": f"Give at most {FORWARD_TARGETS_MAX} numbers to ring.",
        },
        help_text=f'1 to {FORWARD_TARGETS_MAX} E.164 numbers, or "browser" (your console '
        "tabs whose phone is on), rung at once; the first to answer takes the call.",
    )
    ringSeconds = StrictIntegerField(  # noqa: N815
        min_value=FORWARD_RING_SECONDS[0],
        max_value=FORWARD_RING_SECONDS[1],
        default=FORWARD_RING_SECONDS_DEFAULT,
        help_text="How long the targets ring before voicemail answers.",
    )
    screening = StrictBooleanField(
        default=False,
        help_text="Whoever picks up hears who is calling and takes the call by pressing 1.",
    )
    callerId = serializers.ChoiceField(  # noqa: N815
        choices=ForwardCallerId.choices,
        default=ForwardCallerId.CALLER,
        help_text="What the target sees as the caller: `caller` (the caller's number, the "
        "virtual number in a Diversion header) or `number` (the virtual number).",
    )

    def validate_targets(self, targets: list[str]) -> list[str]:
        if len(set(targets)) != len(targets):
            raise serializers.ValidationError("Each target may be named once.")
        return targets


class ForwardingOutput(serializers.Serializer):
    targets = serializers.ListField(
        child=serializers.CharField(),
        help_text='E.164 numbers, and "browser" for the console tabs; empty: forwarding is off.',
    )
    ringSeconds = serializers.IntegerField(source="ring_seconds")  # noqa: N815
    screening = serializers.BooleanField()
    callerId = serializers.ChoiceField(  # noqa: N815
        source="caller_id", choices=ForwardCallerId.choices
    )
