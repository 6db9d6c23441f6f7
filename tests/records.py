"""The history's records as the tests read them: history.records over the call ledger, with the
filters in the history's words (`status`, `caller_num`) as well as the ledger's."""

from __future__ import annotations

from calls.models import Recording, RecordingKind
from history.records import Record, history_calls, records

WORDS = {
    "status": "outcome",
    "caller_num": "caller_id",
    "transcript_status": "recordings__transcript_status",
    "heard": "recordings__heard",
    "recording": "recordings__name",
}


def _calls(filters: dict):
    return history_calls().filter(**{WORDS.get(name, name): v for name, v in filters.items()})


def records_where(**filters) -> list[Record]:
    """The records under `filters`, oldest first."""
    return records(_calls(filters).order_by("created_at", "id"))


def record_get(**filters) -> Record:
    """The one record under `filters` (AssertionError unless exactly one)."""
    found = records_where(**filters)
    assert len(found) == 1, f"{len(found)} records under {filters}"
    return found[0]


def records_count(**filters) -> int:
    return _calls(filters).count()


def refreshed(record: Record) -> Record:
    """The record read again (a Record is a read, with nothing to refresh in place)."""
    return record_get(pk=record.pk)


def voicemail_id(record: Record):
    """The id of the record's voicemail recording (calls.Recording), which the worker's
    transcription (history.tasks.transcription_run) takes."""
    return Recording.objects.get(call_id=record.pk, kind=RecordingKind.VOICEMAIL).pk
