"""core.events' outbox writers see every user event inside the transaction that causes it."""

import pytest
from django.db import connection, transaction

from core import events
from history.services import record_inbound_call
from realtime.services import call_submit
from tests.factories import NumberFactory, NumberMemberFactory

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


def test_a_shared_numbers_event_reaches_only_the_writers_its_members_turned_on(monkeypatch):
    """A member's event goes to the writer of each channel they turned on for the number,
    with `shared`, inside the call's transaction; a writer without a channel never sees it."""
    heard = []

    def channel_writer(name):
        def writer(*, events, rows, owned, shared=False):
            heard.extend((name, user_id, event["type"], shared) for user_id, event in events)

        return writer

    def plain(*, events, rows, owned):
        heard.extend(("plain", user_id, event["type"], False) for user_id, event in events)

    monkeypatch.setattr(events, "_outbox_writers", [])
    monkeypatch.setattr(events, "_writer_channels", {})
    events.outbox_writer_register(channel_writer("hooks"), channel=events.WEBHOOKS)
    events.outbox_writer_register(channel_writer("rooms"), channel=events.MATRIX)
    events.outbox_writer_register(plain)
    number = NumberFactory()
    webhook_only = NumberMemberFactory(number=number, notify_webhook=True).user_id
    both = NumberMemberFactory(number=number, notify_webhook=True, notify_matrix=True).user_id
    NumberMemberFactory(number=number)  # their sockets only

    record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)

    owner = number.owner_id
    assert sorted(heard, key=str) == sorted(
        [
            ("hooks", owner, "call_record", False),
            ("rooms", owner, "call_record", False),
            ("plain", owner, "call_record", False),
            ("hooks", webhook_only, "call_record", True),
            ("hooks", both, "call_record", True),
            ("rooms", both, "call_record", True),
        ],
        key=str,
    )
