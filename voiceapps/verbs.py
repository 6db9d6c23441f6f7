"""The verbs of a script and their validation: one place, used by the socket's `call` frame,
`POST /api/calls` and a number's stored voice application alike.

A script is a JSON array of verbs, each an object with exactly one verb key (say, play,
gather, record, dial, pause, hangup, redirect) whose value holds its fields. A valid script
comes back normalised: every field with its default filled in, so whoever runs it reads no
defaults of its own. A refusal names the path of every bad field, `script.2.gather.numDigits`
(core.errors flattens the nesting with dots).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core import parsing
from core.fields import BoundedTextField, DialableNumberField, StrictCharField, WebhookUrlField
from core.urls import destination_problem
from voiceapps.languages import LANGUAGES

TEXT_MAX = 1000  # a message, and the text of every say
SCRIPT_MAX_VERBS = 50  # counting the verbs of gather's branches
DIGITS = "0123456789*#"
VERBS = ("say", "play", "gather", "record", "dial", "pause", "hangup", "redirect")
PLAY_MAX_BYTES = 5 * 1024 * 1024  # a play's WAV file
PLAY_MAX_SECONDS = 600
MUST_BE_A_STRING = {"required": "Must be a string.", "null": "Must be a string."}


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": TEXT_MAX, "pattern": r"\S"})
class MessageField(BoundedTextField):
    """The text to speak: 1-1000 characters, not only whitespace, kept as sent."""

    default_error_messages = MUST_BE_A_STRING

    def __init__(self, **kwargs):
        super().__init__(max_length=TEXT_MAX, rule=parsing.text_problem, **kwargs)


@extend_schema_field({"type": "string", "enum": sorted(LANGUAGES)})
class LanguageField(StrictCharField):
    """A voice of voiceapps.languages; the default is TTS_DEFAULT_LANGUAGE."""

    default_error_messages = {
        "language": "Not a language Relay speaks; use a code such as en, de, fr or cmn."
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in LANGUAGES:
            self.fail("language")
        return value


@extend_schema_field({"type": "string", "format": "uri", "maxLength": 2000})
class HookUrlField(WebhookUrlField):
    """A URL Relay requests during a call (an actionHook, a redirect, a WAV to play): https,
    leading to a public address (core.urls, the webhooks' SSRF guard). Plain http, and
    private or loopback addresses, only where WEBHOOK_ALLOW_PRIVATE allows them (a LAN, the
    tests). A host that does not resolve yet is accepted: each request to it fails, and the
    call goes on (docs/voice-apps.md)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)  # a URL's shape: core.urls.url_problem
        allow_private = settings.WEBHOOK_ALLOW_PRIVATE
        if not allow_private and not value.startswith("https:"):
            raise serializers.ValidationError("Must be an https URL.")
        problem = destination_problem(value, allow_private=allow_private)
        if problem:
            raise serializers.ValidationError(
                f"{problem}; a call's requests go to public addresses."
            )
        return value


class KeyField(serializers.ChoiceField):
    """One key of a phone's keypad, or "" for none."""

    def __init__(self, **kwargs):
        super().__init__(choices=["", *DIGITS], **kwargs)


class Verb(serializers.Serializer):
    """A verb's fields: unknown ones are refused (a typo must not pass as a default)."""

    default_error_messages = {"invalid": "Must be an object."}

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return dict(super().to_internal_value(data))


def _count(maximum: int, default: int, minimum: int = 1) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=minimum, max_value=maximum, default=default)


class SayVerb(Verb):
    text = MessageField()
    language = LanguageField(required=False, help_text="default TTS_DEFAULT_LANGUAGE")
    loop = _count(10, 1)


class PlayVerb(Verb):
    url = HookUrlField(help_text="a WAV file, at most 5 MB and 10 minutes")
    loop = _count(10, 1)


class RecordVerb(Verb):
    maxSeconds = _count(600, 60)  # noqa: N815
    beep = serializers.BooleanField(default=True)
    finishOnKey = KeyField(default="#")  # noqa: N815
    actionHook = HookUrlField(required=False)  # noqa: N815


class DialVerb(Verb):
    targets = serializers.ListField(
        child=DialableNumberField(), min_length=1, max_length=5, help_text="E.164 numbers"
    )
    timeout = _count(120, 20, minimum=5)
    callerId = serializers.ChoiceField(choices=["number", "caller"], default="number")  # noqa: N815
    actionHook = HookUrlField(required=False)  # noqa: N815


class PauseVerb(Verb):
    seconds = _count(60, 1)


class HangupVerb(Verb):
    pass


class RedirectVerb(Verb):
    url = HookUrlField()


class BranchesField(serializers.Field):
    """gather's routes: {"1": [...], "2": [...], "default": [...]}, each a script that
    replaces the rest of the call's script when its digits are pressed."""

    default_error_messages = {"invalid": "Must be an object of scripts by digits."}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("invalid")
        branches, errors = {}, {}
        for key, script in data.items():
            if key != "default" and not (
                isinstance(key, str) and 0 < len(key) <= 32 and all(c in DIGITS for c in key)
            ):
                errors[parsing.printable(str(key))[:40]] = [
                    'Must be keys pressed (0-9, * and #) or "default".'
                ]
                continue
            try:
                branches[key] = script_check(script, budget=self.context.get("budget"))
            except serializers.ValidationError as refused:
                errors[key] = refused.detail
        if errors:
            raise serializers.ValidationError(errors)
        return branches

    def to_representation(self, value):
        return value


class GatherVerb(Verb):
    numDigits = serializers.IntegerField(min_value=1, max_value=32, required=False)  # noqa: N815
    finishOnKey = KeyField(default="#")  # noqa: N815
    timeout = _count(60, 5)
    say = SayVerb(required=False, help_text="the prompt, interrupted by the first key")
    play = PlayVerb(required=False, help_text="the prompt, interrupted by the first key")
    actionHook = HookUrlField(required=False)  # noqa: N815
    branches = BranchesField(required=False)


VERB_SERIALIZERS = {
    "say": SayVerb,
    "play": PlayVerb,
    "gather": GatherVerb,
    "record": RecordVerb,
    "dial": DialVerb,
    "pause": PauseVerb,
    "hangup": HangupVerb,
    "redirect": RedirectVerb,
}
ONE_VERB = "Must be an object with exactly one verb: " + ", ".join(VERBS) + "."


class _TooMany(Exception):
    """More verbs than SCRIPT_MAX_VERBS: a fault of the whole script, not of a branch."""


class _Budget:
    """The verbs a script may still hold (SCRIPT_MAX_VERBS, branches included)."""

    def __init__(self) -> None:
        self.left = SCRIPT_MAX_VERBS

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _TooMany()


def script_check(data, *, budget: _Budget | None = None) -> list[dict]:
    """`data` as a normalised script; ValidationError with the path of every bad field
    ({"2": {"gather": {"numDigits": [...]}}}) or the script's own fault."""
    if budget is None:
        try:
            return script_check(data, budget=_Budget())
        except _TooMany:
            raise serializers.ValidationError(
                f"Must hold at most {SCRIPT_MAX_VERBS} verbs, counting those in branches."
            ) from None
    if not isinstance(data, list):
        raise serializers.ValidationError("Must be a list of verbs.")
    if not data:
        raise serializers.ValidationError("Must hold at least one verb.")
    verbs, errors = [], {}
    for index, verb in enumerate(data):
        budget.take()
        if not isinstance(verb, dict) or len(verb) != 1 or next(iter(verb)) not in VERBS:
            errors[str(index)] = [ONE_VERB]
            continue
        ((name, body),) = verb.items()
        serializer = VERB_SERIALIZERS[name](data=body, context={"budget": budget})
        if not serializer.is_valid():
            errors[str(index)] = {name: serializer.errors}
            continue
        verbs.append({name: _without_absent(serializer.validated_data)})
    if errors:
        raise serializers.ValidationError(errors)
    return verbs


def _without_absent(body: dict) -> dict:
    return {key: value for key, value in body.items() if value is not None}


SCRIPT_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "maxItems": SCRIPT_MAX_VERBS,
    "description": "verbs, each an object with one key: say, play, gather, record, dial, "
    "pause, hangup or redirect (docs/voice-apps.md)",
    "items": {"type": "object", "minProperties": 1, "maxProperties": 1},
}


@extend_schema_field(SCRIPT_SCHEMA)
class ScriptField(serializers.Field):
    """A script (script_check), normalised."""

    default_error_messages = {"null": "Must be a list of verbs."}

    def to_internal_value(self, data):
        return script_check(data)

    def to_representation(self, value):
        return value


def dial_targets(script: list[dict]) -> list[str]:
    """Every target of every `dial` of a script, branches included, each once: what must pass
    the dialing policy before the script is taken (docs/voice-apps.md)."""
    targets: dict[str, None] = {}
    for verb in script:
        ((name, body),) = verb.items()
        if name == "dial":
            targets.update(dict.fromkeys(body["targets"]))
        elif name == "gather":
            for branch in body.get("branches", {}).values():
                targets.update(dict.fromkeys(dial_targets(branch)))
    return list(targets)
