"""The history's one response that is not JSON: a voicemail message, for the API's download
and the console's player alike."""

from django.http import HttpResponseBase

from core.downloads import file_download
from history import selectors
from history.models import CallRecord


def recording_download(request, record: CallRecord) -> HttpResponseBase:
    """The record's message as WAV, whole or the byte range asked for; NotFound when it has
    no message or its file is gone."""
    audio = selectors.call_record_recording_open(record=record)
    return file_download(
        request, audio, content_type="audio/wav", filename=f"voicemail-{record.pk}.wav"
    )
