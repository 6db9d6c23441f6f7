"""core.events' outbox writers see every user event inside the transaction that causes it."""

import pytest
from django.db import connection, transaction

from core import events
from history.services import record_inbound_call
from tests.factories import NumberFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def seen(monkeypatch):
    calls = []

    def writer(*, events):
        calls.extend(
            (user_id, event["type"], connection.in_atomic_block) for user_id, event in events
        )

    monkeypatch.setattr(events, "_outbox_writers", [])
    events.outbox_writer_register(writer)
    events.outbox_writer_register(writer)  # registering twice is still one writer
    return calls


def test_an_outbox_writer_sees_an_event_inside_its_transaction(seen):
    number = NumberFactory()

    record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)

    assert seen == [(number.owner_id, "call_record", True)]


def test_an_event_rolled_back_leaves_no_trace_in_a_writer_that_writes_rows(seen):
    number = NumberFactory()

    with pytest.raises(RuntimeError), transaction.atomic():
        record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)
        raise RuntimeError("rolled back")

    # The writer ran inside the transaction that was rolled back: rows it wrote went with it.
    assert seen == [(number.owner_id, "call_record", True)]
    assert not number.calls.exists()
