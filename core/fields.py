"""Serializer fields: the one place each input rule is checked, for REST and the socket.

They refuse the wrong JSON type instead of coercing it (DRF's CharField turns 123 into "123"
and IntegerField turns "7" into 7; an API that documents a type should answer 400 when handed
another one), and each states its rule in its OpenAPI schema.
"""

import re
import threading
import unicodedata
from datetime import datetime

from django.conf import settings
from django.core.validators import MaxLengthValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from core.errors import invalid_fields
from core.phone import (
    E164_FORM_PROBLEM,
    E164_MAX_DIGITS,
    E164_MIN_DIGITS,
    E164_UNASSIGNED_PROBLEM,
    e164_digits,
    e164_possible,
    e164_valid,
)
from core.platform.representation import representer
from core.urls import destination_problem, url_problem


def validated(serializer_class, data) -> dict:
    """`data` checked by `serializer_class`, for code outside a view (the WebSocket consumer,
    services that take raw input); InvalidRequest naming every bad field otherwise.

    Valid data is checked by one instance of the serializer per class and thread, its fields
    bound once: DRF deep-copies every declared field for each instance it builds, which was a
    part of every call submitted. Its run_validation keeps no state on the instance, and no
    validator of Relay's has a side effect. Refused data is checked again as DRF's is_valid
    checks it, for the very errors (and wording) it gives."""
    try:
        return _input(serializer_class).run_validation(data)
    except serializers.ValidationError:
        pass
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise invalid_fields(serializer.errors)
    return serializer.validated_data


_inputs = threading.local()


def _input(serializer_class) -> serializers.Serializer:
    """This thread's instance of an input serializer (no context)."""
    made = getattr(_inputs, "made", None)
    if made is None:
        made = _inputs.made = {}
    if serializer_class not in made:
        made[serializer_class] = serializer_class()
    return made[serializer_class]


def represent(serializer_class, instance) -> dict:
    """`serializer_class(instance).data` as a plain dict, the same keys and values in the
    same order, without building a serializer per response, and compiled
    (core.platform.representation). For output serializers that read nothing but `instance` (no
    context)."""
    return representer(serializer_class)(instance)


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class VerbatimCharField(StrictCharField):
    """A string read as sent: not trimmed, and a blank one reaches to_internal_value, so a
    field with its own format answers "" with its own sentence rather than DRF's "may not be
    blank"."""

    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=False, **kwargs)

    def run_validation(self, data=empty):
        # Field's, not CharField's: CharField answers a blank string before to_internal_value.
        return serializers.Field.run_validation(self, data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be an integer."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false, nothing else: DRF's own takes "yes", 1 and "off" too."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class SuccessField(serializers.BooleanField):
    """`success`: true in every answer that has it, whatever the instance (a failure answers
    an error instead), so an output serializer renders it from the row it describes."""

    def get_attribute(self, instance):
        return True


def to_ms(value: datetime | None) -> int | None:
    """A datetime as integer milliseconds since the Unix epoch (the API's timestamp)."""
    if value is None:
        return None
    return int(value.timestamp() * 1000)


@extend_schema_field(OpenApiTypes.INT)
class MillisecondsField(serializers.Field):
    """Read-only datetime rendered as integer epoch milliseconds."""

    def __init__(self, **kwargs):
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value):
        return to_ms(value)


# --- input rules -----------------------------------------------------------------------------
# Each field below is the one place its rule is checked, for REST and the WebSocket alike, and
# its OpenAPI schema states the same rule for generated clients (and schemathesis). Services
# receive values these fields have already cleaned. NUL and lone surrogates are refused in
# every string of every body and frame before any field runs (core/parsing.py); the patterns
# say so for generated clients.
NO_CONTROL = r"\u0000-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff"
TEXT_PATTERN = r"^[^\u0000\ud800-\udfff]*$"
ALIAS_PATTERN = rf"^[^{NO_CONTROL}]*[^\s{NO_CONTROL}][^{NO_CONTROL}]*$"
PIN_PATTERN = r"^[0-9]{4,8}$"
E164_PATTERN = rf"^\+[1-9][0-9]{{{E164_MIN_DIGITS - 1},{E164_MAX_DIGITS - 1}}}$"
ALIAS_MAX_LENGTH = 64


class BoundedTextField(StrictCharField):
    """A string of 1 to `max_length` characters that is not only whitespace and that `rule`
    accepts (`rule(value)` says why not, or returns None).

    Whitespace is kept as sent, or stripped with `trim=True`. Blank and over-long strings get
    the one message "Must be 1 to N characters", so a client learns the whole rule at once.
    """

    def __init__(self, *, max_length: int, rule=None, trim: bool = False, **kwargs):
        self.rule, self.trim = rule, trim
        kwargs.setdefault("error_messages", {})
        kwargs["error_messages"].setdefault("length", f"Must be 1 to {max_length} characters.")
        super().__init__(max_length=max_length, trim_whitespace=False, **kwargs)
        # Length is checked below, with the message above; DRF's own validator would repeat it.
        self.validators = [v for v in self.validators if not isinstance(v, MaxLengthValidator)]

    def run_validation(self, data=empty):
        # Field's, not CharField's: CharField answers a blank string before to_internal_value.
        return serializers.Field.run_validation(self, data)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if self.trim:
            value = value.strip()
        if not value.strip() or len(value) > self.max_length:
            self.fail("length")
        problem = self.rule(value) if self.rule else None
        if problem:
            raise serializers.ValidationError(problem)
        return value


def alias_problem(value: str) -> str | None:
    """Aliases are shown on one line: no control characters, line or paragraph separators."""
    if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
        return "Must not contain control characters."
    return None


@extend_schema_field(
    {"type": "string", "minLength": 1, "maxLength": ALIAS_MAX_LENGTH, "pattern": ALIAS_PATTERN}
)
class AliasField(BoundedTextField):
    """A number's alias: trimmed, 1-64 characters, on one line."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "error_messages", {"length": "Must be 1 to 64 characters after trimming."}
        )
        super().__init__(max_length=ALIAS_MAX_LENGTH, trim=True, rule=alias_problem, **kwargs)


GREETING_MAX_LENGTH = 500


@extend_schema_field(
    {"type": "string", "maxLength": GREETING_MAX_LENGTH, "pattern": rf"^[^{NO_CONTROL}]*$"}
)
class GreetingField(StrictCharField):
    """What voicemail says: 0-500 characters, trimmed, no control characters; empty means
    the service's default greeting."""

    default_error_messages = {
        "length": f"Must be at most {GREETING_MAX_LENGTH} characters after trimming."
    }

    def __init__(self, **kwargs):
        super().__init__(allow_blank=True, trim_whitespace=True, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(value) > GREETING_MAX_LENGTH:
            self.fail("length")
        problem = alias_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


@extend_schema_field({"type": "string", "pattern": PIN_PATTERN})
class PinField(StrictCharField):
    """A PIN: 4 to 8 digits. With `checked=False` any string is taken (a current PIN in a
    wrong format is simply a wrong PIN, answered and counted as one)."""

    default_error_messages = {"pin": "Must be 4 to 8 digits."}

    def __init__(self, *, checked: bool = True, **kwargs):
        self.checked = checked
        super().__init__(max_length=64, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if self.checked and not re.fullmatch(PIN_PATTERN, value):
            self.fail("pin")
        return value


@extend_schema_field({"type": "string", "pattern": E164_PATTERN})
class E164Field(StrictCharField):
    """A phone number in E.164 (`+` and digits), as a string; only its type is checked here.
    The subclasses check and normalise the number."""


class CheckedNumberField(E164Field):
    """A phone number checked by core.phone and returned normalised, taken grouped for reading
    too (e164_digits); the schema shows the form it answers with.

    A refusal says which of two things is wrong (core.phone.e164_problem), so a person knows
    what to fix: the value is not in E.164 form at all (`phone`), or it is, but no range in
    use holds it (`unassigned`), like Ofcom's drama mobiles +44 7700 900xxx where a valid
    number is needed."""

    default_error_messages = {"phone": E164_FORM_PROBLEM, "unassigned": E164_UNASSIGNED_PROBLEM}
    assigned = True  # e164_valid's rule; False: e164_possible's

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        number = e164_valid(value) if self.assigned else e164_possible(value)
        if number is None:
            self.fail("phone" if e164_digits(value) is None else "unassigned")
        return number


class CallerNumberField(CheckedNumberField):
    """A caller's number: any possible number, normalised to E.164 (core.phone.e164_possible)."""

    assigned = False


class DialableNumberField(CheckedNumberField):
    """A number Relay may dial: a valid, assigned-range number (core.phone.e164_valid).
    Missing, null and wrong-typed values get the message of the form, which states the rule."""

    default_error_messages = {
        "invalid": E164_FORM_PROBLEM,
        "required": E164_FORM_PROBLEM,
        "null": E164_FORM_PROBLEM,
    }


@extend_schema_field({"type": "string", "pattern": TEXT_PATTERN})
class TextField(StrictCharField):
    pass


@extend_schema_field({"type": "string", "format": "uri", "maxLength": 2000})
class WebhookUrlField(StrictCharField):
    """An http or https URL Relay will POST signed events to (core.urls.url_problem)."""

    def __init__(self, **kwargs):
        super().__init__(max_length=2000, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        problem = url_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


@extend_schema_field({"type": "string", "format": "uri", "maxLength": 2000})
class PublicUrlField(WebhookUrlField):
    """A WebhookUrlField that leads to a public address (core.urls.destination_problem),
    unless WEBHOOK_ALLOW_PRIVATE: refused when it is given, not at every later request."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        problem = destination_problem(value, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
        if problem:
            raise serializers.ValidationError(
                f"{problem}; Relay's requests go to public addresses."
            )
        return value
