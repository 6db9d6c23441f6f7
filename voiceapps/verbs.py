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
from core.fields import (
    BoundedTextField,
    DialableNumberField,
    StrictBooleanField,
    StrictCharField,
    WebhookUrlField,
)
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
    # Issue 58: both parties hear the recording's announcement, then the bridge is recorded.
    record = StrictBooleanField(required=False, default=False)


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


INPUTS = ("dtmf", "speech")
HINTS_MAX = 50  # words or phrases to prefer, each at most HINT_MAX characters
HINT_MAX = 100
SPEECH_TIMEOUT_MAX = 10  # seconds of silence that end an utterance
# "auto": the silence that ends an utterance when none is named (docs/decisions.md).
SPEECH_TIMEOUT_AUTO = 1.0


class InputField(serializers.ListField):
    """What a gather hears: ["dtmf"], ["speech"] or both, each once."""

    def __init__(self, **kwargs):
        super().__init__(
            child=serializers.ChoiceField(choices=list(INPUTS)),
            min_length=1,
            max_length=len(INPUTS),
            **kwargs,
        )

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Must name each input once.")
        return [name for name in INPUTS if name in value]


class HintsField(serializers.ListField):
    """Words or phrases the recogniser should prefer: a list of 1-100 character strings, at
    most 50 (TwiML's comma-separated `hints` becomes this list)."""

    def __init__(self, **kwargs):
        super().__init__(
            child=BoundedTextField(max_length=HINT_MAX, rule=parsing.text_problem),
            max_length=HINTS_MAX,
            **kwargs,
        )


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": SPEECH_TIMEOUT_MAX},
            {"type": "string", "enum": ["auto"]},
        ]
    }
)
class SpeechTimeoutField(serializers.Field):
    """Seconds of silence that end an utterance, 1-10, or "auto" (SPEECH_TIMEOUT_AUTO)."""

    default_error_messages = {
        "invalid": f'Must be a whole number of seconds from 1 to {SPEECH_TIMEOUT_MAX}, or "auto".'
    }

    def to_internal_value(self, data):
        if data == "auto":
            return data
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        if not 1 <= data <= SPEECH_TIMEOUT_MAX:
            self.fail("invalid")
        return data

    def to_representation(self, value):
        return value


class SpeechLanguageField(LanguageField):
    """The language a speech gather hears: one of Relay's languages (LanguageField), and
    English, the only one the transcription engines hear."""

    default_error_messages = {
        **LanguageField.default_error_messages,
        "english": "Relay's speech recognition hears English only; use en, en-us or en-gb.",
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value != "en" and not value.startswith("en-"):
            self.fail("english")
        return value


class GatherVerb(Verb):
    numDigits = serializers.IntegerField(min_value=1, max_value=32, required=False)  # noqa: N815
    finishOnKey = KeyField(default="#")  # noqa: N815
    timeout = _count(60, 5)
    say = SayVerb(required=False, help_text="the prompt, interrupted by the first key")
    play = PlayVerb(required=False, help_text="the prompt, interrupted by the first key")
    actionHook = HookUrlField(required=False)  # noqa: N815
    branches = BranchesField(required=False)
    input = InputField(default=["dtmf"], help_text='["dtmf"], ["speech"] or both')
    hints = HintsField(required=False, help_text="speech: words or phrases to prefer")
    speechTimeout = SpeechTimeoutField(  # noqa: N815
        required=False, help_text='speech: seconds of silence that end it, or "auto" (1 s)'
    )
    language = SpeechLanguageField(required=False, help_text="speech: the language heard (en)")

    def validate(self, attrs):
        if "speech" in attrs["input"]:
            attrs.setdefault("hints", [])
            attrs.setdefault("speechTimeout", "auto")
            attrs.setdefault("language", "en")
        else:
            named = sorted(key for key in ("hints", "speechTimeout", "language") if key in attrs)
            if named:
                raise serializers.ValidationError(
                    {key: ['Only for a gather whose input holds "speech".'] for key in named}
                )
        return attrs


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
