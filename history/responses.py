"""The history's one response that is not JSON: a voicemail message, for the API's download
and the console's player alike."""

from django.http import HttpResponseBase

from core.recordings import recording_download as wav_download
from history.records import Record


def recording_download(request, record: Record) -> HttpResponseBase:
    """The record's message as WAV, whole or the byte range asked for; NotFound when it has
    no message or its file is gone."""
    return wav_download(request, record.recording, filename=f"voicemail-{record.pk}.wav")
