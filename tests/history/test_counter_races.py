"""On PostgreSQL, writers that record calls for one owner, delete that owner's numbers and
recount the counters, all at once and each on its own connection, leave the counters equal
to a COUNT over the rows: the database's locks decide, not timing luck."""

import itertools
import threading

import pytest

from core.errors import NotFound
from history.selectors import history_page
from history.services import call_record_counters_recount, record_inbound_call
from tests.factories import NumberFactory, UserFactory
from tests.records import records_count
from tests.totals import CONCURRENT_WRITERS, assert_totals_exact, run_together
from virtual_numbers import services as numbers
from virtual_numbers.models import Number

pytestmark = [pytest.mark.django_db(transaction=True), CONCURRENT_WRITERS]

WRITERS = 8
RECORDS_EACH = 25
STATUSES = ["answered", "missed", "blocked"]


class Records:
    """WRITERS threads recording calls on the owner's numbers and a bystander's; `halfway` is
    set when half of all records are written, so the deletions land among live writes."""

    def __init__(self, held: list[Number], bystander: Number):
        self.numbers = [*held, bystander]
        self.halfway = threading.Event()
        self.written = itertools.count(1)

    def writer(self, index: int):
        def write() -> int:
            # Instances of its own, as another process would have: a deletion in one
            # thread must not change the objects another holds.
            mine = [Number.objects.get(pk=n.pk) for n in self.numbers]
            refused = 0
            for i in range(RECORDS_EACH):
                try:
                    record_inbound_call(
                        number=mine[(index + i) % len(mine)],
                        caller_num=f"+4477009001{index:02d}",
                        status=STATUSES[(index * 7 + i) % 3],
                        duration=i,
                    )
                except NotFound:
                    refused += 1  # its number was deleted a moment ago
                if next(self.written) == WRITERS * RECORDS_EACH // 2:
                    self.halfway.set()
            return refused

        return write

    def once_halfway(self, job, **kwargs):
        def run():
            assert self.halfway.wait(timeout=60)
            return job(**kwargs)

        return run


def test_concurrent_records_deletions_and_recounts_never_make_the_counters_drift():
    owner = UserFactory()
    held = [NumberFactory(owner=owner) for _ in range(5)]
    records = Records(held, bystander=NumberFactory())  # another owner's, written at once

    results = run_together(
        [records.writer(i) for i in range(WRITERS)]
        + [
            records.once_halfway(numbers.number_delete, number=held[0]),
            records.once_halfway(numbers.number_release, number=held[1]),
            records.once_halfway(call_record_counters_recount),
        ]
    )

    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, errors
    assert results[-1] == [], "a recount beside live writers found drift that was not there"
    assert not records_count(number_id__in=[held[0].pk, held[1].pk]) > 0
    assert_totals_exact()
    for status in [None, *STATUSES]:
        rows = records_count(owner=owner, **({"status": status} if status else {}))
        page = history_page(user=owner, status=status, limit=1, offset=0)
        assert page.total == rows > 0, status
    for number in held[2:]:
        page = history_page(user=owner, status=None, limit=1, offset=0, number_id=number.pk)
        assert page.total == records_count(number=number) > 0
