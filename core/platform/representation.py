"""Output serializers rendered without DRF's per-field machinery, to the same dict.

`representer(serializer_class)` compiles an output serializer (one that reads nothing but its
instance) into a function of the instance. Each field keeps DRF's own rules, and only the work
that cannot change the result is skipped:

- the value is read with plain getattr when every step of the field's source is an
  attribute of an object (not a Mapping) and the value is of a plain type (str, int, float,
  bool, UUID, datetime, Decimal, None). Anything else (a Mapping, a callable, a missing
  attribute, a related object that does not exist, a default) goes through the field's own
  `get_attribute`, which decides as DRF does;
- None is None, as DRF's Serializer.to_representation has it;
- a CharField's, IntegerField's and FloatField's value goes through str, int and float,
  which is all DRF's to_representation does for them, and a hex_verbose UUIDField's through
  str; every other field through its own `to_representation`;
- a nested serializer, `many` or not, is compiled the same way.

A serializer (or `many` list) that overrides `to_representation` is rendered by DRF itself.
tests/relay/test_representation.py holds the compiled output equal to DRF's, key order
included: the history's records and page, the calls' ack, status, list and detail outputs,
a number, a session, and a serializer with each kind of field DRF reads apart.

Rendering 50 history rows through DRF cost about 1 ms of a 6 ms request: per field, a
Mapping check, a callable check, exception handling and a method call (docs/benchmarks.md).

This keys on DRF's methods by identity and reads its `_readable_fields`
(tests/platform/edges.py checks each). COMPILED_REPRESENTATION=false renders every output
through DRF itself (`serializer.data`), the same dict.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime
from decimal import Decimal
from functools import cache

from django.conf import settings
from django.db import models
from rest_framework import fields as drf_fields
from rest_framework import relations, serializers

PLAIN = frozenset({str, int, float, bool, type(None), uuid.UUID, datetime, date, Decimal})

_AS_IS = {
    drf_fields.CharField.to_representation: str,
    drf_fields.IntegerField.to_representation: int,
    drf_fields.FloatField.to_representation: float,
}

Representer = Callable[[object], dict]

# Classes seen not to be Mappings (a model, a dataclass): isinstance against an ABC, asked for
# every field of every row, was the biggest part of reading a value.
_OBJECTS: set[type] = set()


def representer(serializer_class) -> Representer:
    """The to_representation of an output serializer class: compiled (once per process), or
    DRF's own with COMPILED_REPRESENTATION off."""
    if not getattr(settings, "COMPILED_REPRESENTATION", True):
        return lambda instance: dict(serializer_class(instance).data)
    return _compiled(serializer_class)


@cache
def _compiled(serializer_class) -> Representer:
    return _compile(serializer_class())


def _compile(serializer: serializers.BaseSerializer) -> Callable:
    if isinstance(serializer, serializers.ListSerializer):
        return _many(serializer)
    if type(serializer).to_representation is not serializers.Serializer.to_representation:
        return serializer.to_representation
    plan = [
        (field.field_name, _reader(field), _converter(field))
        for field in serializer._readable_fields
    ]

    def represent(instance) -> dict:
        ret = {}
        for name, read, convert in plan:
            try:
                value = read(instance)
            except serializers.SkipField:
                continue
            ret[name] = None if value is None else convert(value)
        return ret

    return represent


def _many(serializer: serializers.ListSerializer) -> Callable:
    if type(serializer).to_representation is not serializers.ListSerializer.to_representation:
        return serializer.to_representation
    child = _compile(serializer.child)

    def represent_many(data) -> list:
        items = data.all() if isinstance(data, models.manager.BaseManager) else data
        return [child(item) for item in items]

    return represent_many


def _reader(field: drf_fields.Field) -> Callable:
    """The field's value of an instance, as field.get_attribute gives it."""
    drf_read = field.get_attribute
    if (
        type(field).get_attribute is not drf_fields.Field.get_attribute
        or isinstance(field, relations.RelatedField | relations.ManyRelatedField)
        or not field.source_attrs  # source="*": the instance itself
    ):
        return drf_read
    attrs = tuple(field.source_attrs)

    def read(instance):
        value = instance
        for attr in attrs:
            kind = type(value)
            if kind not in _OBJECTS:
                if isinstance(value, Mapping):
                    return drf_read(instance)
                _OBJECTS.add(kind)
            try:
                value = getattr(value, attr)
            except Exception:  # noqa: BLE001 - DRF's own read decides what it means
                return drf_read(instance)
        return value if type(value) in PLAIN else drf_read(instance)

    return read


def _converter(field: drf_fields.Field) -> Callable:
    if isinstance(field, serializers.BaseSerializer):
        return _compile(field)
    method = type(field).to_representation
    if method in _AS_IS:
        return _AS_IS[method]
    if method is drf_fields.UUIDField.to_representation and field.uuid_format == "hex_verbose":
        return str
    return field.to_representation
