"""`total` of the history list is a sum of per-(owner, number, status) counters; every path
that writes or deletes records keeps them equal to the rows."""

import dataclasses
import itertools
from io import StringIO

import pytest
from django.core.management import call_command

from calls.models import OutcomeCounter
from core.errors import NotFound
from core.fields import represent
from core.pagination import Cursor
from history.records import history_calls, records
from history.selectors import history_page
from history.serializers import HistoryOutput
from history.services import record_inbound_call
from tests.factories import CallRecordFactory, NumberFactory, UserFactory
from tests.records import records_count
from tests.totals import assert_totals_exact, history_counted
from virtual_numbers import services as numbers

pytestmark = pytest.mark.django_db

STATUSES = ["answered", "missed", "blocked"]


@pytest.fixture
def numbers_of_user(user):
    return [NumberFactory(owner=user) for _ in range(3)]


@pytest.fixture
def recorded(numbers_of_user):
    """20 calls recorded through the service on three numbers, statuses mixed unevenly."""
    pairs = zip(itertools.cycle(numbers_of_user), itertools.cycle(STATUSES + ["answered"]))
    for number, status in itertools.islice(pairs, 20):
        record_inbound_call(number=number, caller_num="+447700900123", status=status, duration=0)
    return numbers_of_user


def test_recording_a_call_counts_it_on_its_number_and_status(user):
    number = NumberFactory(owner=user)

    record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)
    record_inbound_call(number=number, caller_num="+447700900124", status="missed", duration=0)

    assert history_counted() == {(user.pk, number.pk, "missed"): 2}


def test_a_blocked_caller_is_counted_as_blocked(user):
    number = NumberFactory(owner=user)
    numbers.blocked_caller_add(number=number, caller_num="+447700900666")

    record_inbound_call(number=number, caller_num="+447700900666", status="answered", duration=9)

    assert history_counted() == {(user.pk, number.pk, "blocked"): 1}


def test_every_filter_total_equals_a_count_of_the_rows(client_jwt, user, recorded):
    for number_id, status in itertools.product([None, *(n.pk for n in recorded)], STATUSES):
        rows = history_calls().filter(owner=user)
        params = {}
        if number_id is not None:
            rows, params["number_id"] = rows.filter(number_id=number_id), str(number_id)
        if status is not None:
            rows, params["status"] = rows.filter(outcome=status), status

        body = client_jwt.get("/api/history", params).json()

        assert body["total"] == rows.count(), params
    assert client_jwt.get("/api/history").json()["total"] == 20
    assert_totals_exact()


def test_another_users_counters_are_not_summed(outsider, recorded):
    assert outsider.get("/api/history").json()["total"] == 0


def test_deleting_a_number_takes_its_counters_with_its_records(client_jwt, recorded):
    client_jwt.delete(f"/api/numbers/{recorded[0].pk}")

    assert not OutcomeCounter.objects.filter(number_id=recorded[0].pk).exists()
    assert client_jwt.get("/api/history").json()["total"] == records_count() == 13
    assert_totals_exact()


def test_releasing_a_number_in_the_admin_keeps_the_totals_exact(staff_client, recorded):
    staff_client.post(
        "/admin/numbers/number/", {"action": "release", "_selected_action": [str(recorded[1].pk)]}
    )

    assert not records_count(number_id=recorded[1].pk) > 0
    assert_totals_exact()


def test_the_admins_bulk_delete_of_numbers_goes_through_the_service(staff_client, recorded):
    # As the release action (above): the number's calls and counters go with it, exactly.
    response = staff_client.post(
        "/admin/numbers/number/",
        {"action": "delete_selected", "_selected_action": [str(recorded[2].pk)], "post": "yes"},
    )

    assert response.status_code == 302
    assert records_count(number_id=recorded[2].pk) == 0
    assert not OutcomeCounter.objects.filter(number_id=recorded[2].pk).exists()
    assert_totals_exact()


def test_deleting_a_user_takes_their_counters_with_their_records(user, recorded):
    other = NumberFactory()
    record_inbound_call(number=other, caller_num="+447700900123", status="missed", duration=0)

    user.delete()

    assert history_counted() == {(other.owner_id, other.pk, "missed"): 1}
    assert_totals_exact()


def test_recording_on_a_number_deleted_meanwhile_is_not_found_and_counts_nothing(user):
    number = NumberFactory(owner=user)
    numbers.number_delete(number=number)

    with pytest.raises(NotFound):
        record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)

    assert not records_count() > 0
    assert not OutcomeCounter.objects.exists()


def test_factory_records_are_counted_like_recorded_ones(user):
    number = NumberFactory(owner=user)

    CallRecordFactory.create_batch(3, number=number, status="blocked")

    assert history_counted() == {(user.pk, number.pk, "blocked"): 3}


def test_the_commands_that_write_records_keep_the_totals_exact():
    holder = NumberFactory()  # before seed_demo stocks the inventory the factory draws from
    call_command("seed_demo", stdout=StringIO())
    call_command(
        "record_call",
        "--number",
        holder.number,
        "--caller",
        "+447700900123",
        "--status",
        "answered",
        stdout=StringIO(),
    )
    bench = UserFactory(email="bench@example.com")
    call_command("seed_history", "--email", bench.email, "--count", "1234", stdout=StringIO())

    assert sum(history_counted().values()) == 300 + 1 + 1234
    assert_totals_exact()


def test_a_page_costs_the_same_few_queries_at_any_depth(
    user, recorded, django_assert_max_num_queries
):
    with django_assert_max_num_queries(2):  # the counters' sum, the page with its numbers
        first = history_page(user=user, status=None, limit=5, offset=0)
        # Rendered from what the page read: no column of a row is fetched afterwards.
        represent(HistoryOutput, first)
    with django_assert_max_num_queries(2):
        history_page(user=user, status="missed", limit=5, offset=0, before=None)
    with django_assert_max_num_queries(3):  # and whether the number is the user's
        history_page(user=user, status=None, limit=5, offset=0, number_id=recorded[0].pk)
    with django_assert_max_num_queries(3):  # past an offset: positions, then the rows
        deep = history_page(user=user, status=None, limit=5, offset=10)
        represent(HistoryOutput, deep)
    with django_assert_max_num_queries(2):
        keyset = history_page(
            user=user, status=None, limit=5, offset=0, before=Cursor.decode(first.next_cursor)
        )
    with django_assert_max_num_queries(2):
        deeper = history_page(
            user=user, status=None, limit=5, offset=0, before=Cursor.decode(keyset.next_cursor)
        )
    assert [r.pk for r in deeper.records] == [r.pk for r in deep.records]
    assert deeper.next_cursor == deep.next_cursor


@pytest.mark.parametrize("status", [None, "missed", "answered"])
@pytest.mark.parametrize("on_number", [False, True])
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_a_page_from_its_start_is_the_page_the_orm_reads(user, recorded, status, on_number, limit):
    """The first page and every cursor's (one compiled statement, records built from its rows)
    hold what the ORM's read of the same page holds, rendered alike, to the end of the list."""
    from core.pagination import page_rows
    from history.selectors import history_querysets

    number_id = recorded[1].pk if on_number else None
    calls, _ = history_querysets(user=user, status=status, number_id=number_id)
    before, pages = None, 0
    while True:
        page = history_page(user=user, status=status, limit=limit, offset=0,
                            number_id=number_id, before=before)  # fmt: skip
        found, cursor = page_rows(calls, limit=limit, offset=0, before=before)
        expected = records(
            calls.filter(pk__in=[c.pk for c in found]).order_by("-created_at", "-id")
        )
        assert represent(HistoryOutput, page) == represent(
            HistoryOutput, dataclasses.replace(page, records=expected)
        )
        assert page.next_cursor == cursor
        assert all(record.number.owner_id == user.pk for record in page.records)  # read on use
        pages += 1
        if cursor is None:
            break
        before = Cursor.decode(cursor)
    assert pages == max(1, -(-page.total // limit))
