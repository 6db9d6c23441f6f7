"""core.platform.compiled: a queryset compiled once per process answers what the queryset itself
would, for every value, and reads the database afresh on every call."""

import uuid
from datetime import timedelta

import pytest
from django.db.models import DateTimeField, UUIDField
from django.utils import timezone

from calls.models import Call
from core.platform.compiled import CompiledInQuery, CompiledQuery
from tests.factories import CallRecordFactory, NumberFactory


def newer_records(*, owner, since):
    return (
        Call.objects.filter(owner=owner, created_at__gt=since)
        .order_by("-created_at", "-id")
        .values("id", "created_at", "duration", "number__number", "number__alias")
    )


@pytest.fixture
def records(user):
    now = timezone.now()
    numbers = [NumberFactory(owner=user, alias="Office"), NumberFactory(owner=user, alias="Home")]
    return [
        CallRecordFactory(number=numbers[i % 2], created_at=now - timedelta(hours=i), duration=i)
        for i in range(6)
    ]


@pytest.mark.django_db
def test_a_compiled_query_returns_the_rows_its_queryset_returns(user, other_user, records):
    compiled = CompiledQuery(newer_records, owner=UUIDField(), since=DateTimeField())
    now = timezone.now()

    for owner in (user, other_user):
        for hours in (0, 1, 2.5, 5, 10):
            since = now - timedelta(hours=hours)
            expected = list(newer_records(owner=owner.pk, since=since))
            assert compiled.rows(owner=owner.pk, since=since) == expected
    rows = compiled.rows(owner=user.pk, since=now - timedelta(days=1))
    assert len(rows) == 6
    # The ORM's converters ran: times are aware datetimes, ids UUIDs, on every backend.
    assert rows[0]["created_at"] == records[0].created_at
    assert rows[0]["id"] == records[0].id


@pytest.mark.django_db
def test_it_compiles_once_and_reads_the_database_afresh_on_every_call(user, records):
    built = []

    def build(**values):
        built.append(values)
        return newer_records(**values)

    compiled = CompiledQuery(build, owner=UUIDField(), since=DateTimeField())
    since = timezone.now() - timedelta(days=1)

    assert len(compiled.rows(owner=user.pk, since=since)) == 6
    Call.objects.filter(pk=records[0].pk).update(duration=999)
    Call.objects.filter(pk=records[1].pk).delete()
    rows = compiled.rows(owner=user.pk, since=since)

    assert len(built) == 1
    assert [row["id"] for row in rows] == [r.id for r in records if r is not records[1]]
    assert rows[0]["duration"] == 999
    assert compiled.first(owner=uuid.uuid4(), since=since) is None


@pytest.mark.django_db
def test_a_placeholder_the_query_never_uses_is_refused(user):
    compiled = CompiledQuery(
        lambda owner, since: Call.objects.filter(owner=owner).values("id"),
        owner=UUIDField(),
        since=DateTimeField(),
    )

    with pytest.raises(ValueError, match="since"):
        compiled.rows(owner=user.pk, since=timezone.now())


@pytest.mark.django_db
def test_a_queryset_of_model_instances_is_refused(user):
    compiled = CompiledQuery(lambda owner: Call.objects.filter(owner=owner), owner=UUIDField())

    with pytest.raises(ValueError, match="values"):
        compiled.rows(owner=user.pk)


@pytest.mark.django_db
def test_a_placeholder_left_out_leaves_its_filter_off(user, records):
    def build(owner, since=None):
        rows = Call.objects.filter(owner=owner)
        if since is not None:
            rows = rows.filter(created_at__gt=since)
        return rows.order_by("-created_at", "-id").values("id")

    compiled = CompiledQuery(build, owner=UUIDField(), since=DateTimeField())
    since = records[2].created_at

    assert len(compiled.rows(owner=user.pk)) == 6
    assert [row["id"] for row in compiled.rows(owner=user.pk, since=since)] == [
        records[0].id,
        records[1].id,
    ]
    assert len(compiled.rows(owner=user.pk)) == 6
    with pytest.raises(TypeError, match="status"):
        compiled.rows(owner=user.pk, status="missed")


def records_of(*, owners, since):
    return (
        Call.objects.filter(owner__in=owners, created_at__gt=since)
        .order_by("-created_at", "-id")
        .values("id", "owner_id", "created_at")
    )


@pytest.mark.django_db
def test_a_compiled_in_query_returns_its_querysets_rows_for_lists_of_every_length(records):
    built = []

    def build(**values):
        built.append(len(values["owners"]))
        return records_of(**values)

    compiled = CompiledInQuery(build, lists={"owners": UUIDField()}, since=DateTimeField())
    owners = [records[0].owner_id, *(uuid.uuid4() for _ in range(8))]
    since = timezone.now() - timedelta(days=1)

    for length in range(len(owners) + 1):
        for order in (owners[:length], owners[:length][::-1]):
            expected = list(records_of(owners=order, since=since))
            assert compiled.rows(owners=order, since=since) == expected
    assert len(compiled.rows(owners=[owners[0]] * 3, since=since)) == 6  # once each
    assert len(compiled.rows(owners=owners[1:], since=since)) == 0
    # One statement per size bucket (0, 1, 2, 4, 8, 16), whatever the lengths asked for.
    assert sorted(built) == [0, 1, 2, 4, 8, 16]
