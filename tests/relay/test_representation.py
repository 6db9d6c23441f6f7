"""core.fields.represent: an output serializer compiled once per process
(core.platform.representation) renders exactly what a serializer built per response would: the same
keys, in the same order, with the same values, the edge cases of DRF's reading included."""

from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.db.models.manager import BaseManager
from rest_framework import serializers

from accounts.serializers import SessionOutput
from calls.models import CallEvent
from calls.states import CallState
from core.fields import MillisecondsField, represent
from core.pagination import Page
from core.platform.representation import representer
from history.serializers import CallRecordOutput, HistoryOutput
from realtime.serializers import CallAckOutput, CallDetailOutput, CallOutput, CallStatusOutput
from tests.factories import (
    CallFactory,
    CallRecordFactory,
    LoginSessionFactory,
    NumberFactory,
)
from virtual_numbers.serializers import NumberOutput


def assert_same(serializer_class, instance) -> None:
    """The compiled rendering of `instance` is DRF's, key order included."""
    compiled = represent(serializer_class, instance)
    assert list(compiled.items()) == list(serializer_class(instance).data.items())


@pytest.mark.django_db
def test_represent_renders_what_the_serializer_renders(user):
    number = NumberFactory(owner=user, alias="Office")
    records = [
        CallRecordFactory(number=number, status="missed", duration=0),
        CallRecordFactory(
            number=number,
            status="answered",
            answered_by="forward",
            forwarded_to="+447700900999",
            recording="voicemail/a.wav",
            recording_seconds=8.52,
            created_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        ),
    ]
    sessions = [LoginSessionFactory(user=user), LoginSessionFactory(user=user, active=False)]

    for record in records:
        assert_same(CallRecordOutput, record)
    for session in sessions:
        assert represent(SessionOutput, session) == SessionOutput(session).data
    # A paged answer renders its rows through the nested serializer, as DRF would.
    page = Page(records=records, total=2, limit=50, offset=0, next_cursor=None)
    assert represent(HistoryOutput, page) == HistoryOutput(page).data


@pytest.mark.django_db
def test_every_kind_of_record_call_and_number_renders_as_drf_renders_it(user):
    number = NumberFactory(owner=user, alias="")
    records = [
        CallRecordFactory(number=number, status="blocked", duration=0, caller_num="anonymous"),
        CallRecordFactory(
            number=number,
            answered_by="voicemail",
            recording="voicemail/b.wav",
            recording_seconds=3.0,
            heard=True,
            transcript="call me back",
            transcript_confidence=0.58,
            transcript_status="done",
        ),
        CallRecordFactory(number=number, answered_by="forward", forwarded_to="browser"),
    ]
    for record in records:
        assert_same(CallRecordOutput, record)
    calls = [
        CallFactory(owner=user),
        CallFactory(owner=user, status=CallState.FAILED, failure_reason="busy"),
        CallFactory(owner=user, status=CallState.COMPLETED, duration=12, number=number),
    ]
    CallEvent.objects.create(call=calls[2], seq=1, status=CallState.QUEUED, at=calls[2].created_at)
    for call in calls:
        for output in (CallAckOutput, CallStatusOutput, CallOutput, CallDetailOutput):
            assert_same(output, call)
    assert_same(NumberOutput, number)


@dataclass
class Thing:
    name: object = "a"
    count: object = 3
    ratio: object = 0.5
    when: object = None
    inner: object = None
    rows: object = ()

    def shout(self) -> str:
        return str(self.name).upper()

    @property
    def broken(self):
        raise AttributeError("not here")


class InnerOutput(serializers.Serializer):
    label = serializers.CharField()


class EdgeOutput(serializers.Serializer):
    """Each way DRF reads a value other than a plain attribute."""

    name = serializers.CharField()
    count = serializers.IntegerField()
    ratio = serializers.FloatField()
    when = MillisecondsField(allow_null=True)
    shout = serializers.CharField()  # a method: DRF calls it
    label = serializers.CharField(source="inner.label", allow_null=True)  # through None
    broken = serializers.CharField(required=False)  # AttributeError, not required: left out
    defaulted = serializers.CharField(default="dflt")  # missing, with a default
    flag = serializers.BooleanField(source="name")  # BooleanField's own rules ("off")
    method = serializers.SerializerMethodField()
    inner = InnerOutput(allow_null=True)
    many = InnerOutput(many=True, source="rows", required=False)  # Mappings and objects

    def get_method(self, obj) -> str:
        return "m"


@pytest.mark.parametrize(
    "instance",
    [
        Thing(),
        Thing(name="off", count=True, ratio=2, when=datetime(2026, 1, 2, tzinfo=UTC)),
        Thing(inner={"label": "in a dict"}),
        Thing(inner=SimpleNamespace(label="x")),
        {"name": "a mapping", "count": 1, "ratio": 1.5, "when": None, "inner": None,
         "shout": "S", "label": "L"},
        Thing(rows=({"label": "one"}, SimpleNamespace(label=2))),
        Thing(rows=({"label": "one"}, {"no label": 2})),
    ],
    ids=["plain", "coerced", "inner-mapping", "inner-object", "mapping", "many", "many-bad"],
)  # fmt: skip
def test_a_serializer_of_every_kind_of_field_renders_as_drf_renders_it(instance):
    try:
        expected = EdgeOutput(instance).data
    except KeyError:  # a row of `many` without a label: the compiled one fails alike
        assert instance.rows[-1] == {"no label": 2}
        with pytest.raises(KeyError):
            representer(EdgeOutput)(instance)
        return
    assert list(representer(EdgeOutput)(instance).items()) == list(expected.items())


def test_a_nested_many_reads_a_manager_as_drf_does():
    class Manager(BaseManager):
        def __init__(self, rows):
            self.rows = rows

        def all(self):
            return self.rows

    class ListOutput(serializers.Serializer):
        items = InnerOutput(many=True)

    @dataclass
    class Holder:
        items: object

    holder = Holder(items=Manager([Thing(name="n", inner=None)]))
    holder.items.rows = [{"label": "first"}, {"label": "second"}]
    assert representer(ListOutput)(holder) == ListOutput(holder).data
