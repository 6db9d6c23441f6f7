"""core.fields.represent: an output serializer's fields bound once per process render
exactly what a serializer built per response would."""

from datetime import UTC, datetime

import pytest

from accounts.serializers import SessionOutput
from core.fields import represent
from core.pagination import Page
from history.serializers import CallRecordOutput, HistoryOutput
from tests.factories import CallRecordFactory, LoginSessionFactory, NumberFactory


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
        assert list(represent(CallRecordOutput, record).items()) == list(
            CallRecordOutput(record).data.items()
        )
    for session in sessions:
        assert represent(SessionOutput, session) == SessionOutput(session).data
    # A paged answer renders its rows through the nested serializer, as DRF would.
    page = Page(records=records, total=2, limit=50, offset=0, next_cursor=None)
    assert represent(HistoryOutput, page) == HistoryOutput(page).data
