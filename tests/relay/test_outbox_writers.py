"""core.events' outbox writers see every user event inside the transaction that causes it."""

import pytest
from django.db import connection, transaction

from core import events
from history.services import record_inbound_call
from realtime.services import call_submit
from tests.factories import NumberFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def seen(monkeypatch):
    calls = []

    def writer(*, events, rows, owned):
        calls.extend(
            (user_id, event["type"], connection.in_atomic_block, row)
            for (user_id, event), row in zip(events, rows, strict=True)
        )

    monkeypatch.setattr(events, "_outbox_writers", [])
    events.outbox_writer_register(writer)
    events.outbox_writer_register(writer)  # registering twice is still one writer
    return calls


def test_an_outbox_writer_sees_an_event_inside_its_transaction(seen):
    number = NumberFactory()

    record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)

    assert seen == [(number.owner_id, "call_record", True, None)]


def test_a_call_status_comes_with_the_call_its_sender_wrote(seen, user):
    """The writer gets the row an event reports when its sender has it in hand, so that it
    need not read it again (the webhook writer takes a call's statusCallback from it)."""
    data = {"type": "call", "callId": "c-1", "to": "+442079460120", "message": "hi"}

    call, created = call_submit(user=user, data=data)

    assert created
    assert seen == [(user.pk, "call_status", True, call)]


def test_an_event_rolled_back_leaves_no_trace_in_a_writer_that_writes_rows(seen):
    number = NumberFactory()

    with pytest.raises(RuntimeError), transaction.atomic():
        record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)
        raise RuntimeError("rolled back")

    # The writer ran inside the transaction that was rolled back: rows it wrote went with it.
    assert seen == [(number.owner_id, "call_record", True, None)]
    assert not number.calls.exists()
