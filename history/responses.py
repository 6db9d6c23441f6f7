"""The history's responses that are not JSON: a voicemail message and a bridged call's
recording, for the API's downloads and the console's players alike."""

from django.http import HttpResponseBase

from calls.models import Recording
from core.recordings import recording_download as wav_download
from history.records import Record


def recording_download(request, record: Record) -> HttpResponseBase:
    """The record's message as WAV, whole or the byte range asked for; NotFound when it has
    no message or its file is gone."""
    return wav_download(request, record.recording, filename=f"voicemail-{record.pk}.wav")


def call_recording_download(request, recording: Recording) -> HttpResponseBase:
    """A bridged call's recording (issue 58) as stereo WAV, whole or the byte range asked
    for; NotFound when its file is gone."""
    return wav_download(request, recording.name, filename=f"call-recording-{recording.pk}.wav")
