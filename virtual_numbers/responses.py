"""The numbers' responses that are not JSON: a recorded greeting and a number's music on
hold, for the API's download and the console's player alike (as history.responses serves a
voicemail message)."""

from django.http import HttpResponseBase

from core.recordings import recording_download
from virtual_numbers.models import Number, OpeningHours


def greeting_download(request, number: Number, *, closed: bool = False) -> HttpResponseBase:
    """The number's recorded greeting (or `closed` greeting) as WAV, whole or the byte range
    asked for; NotFound when it has none or its file is gone."""
    if closed:
        hours = OpeningHours.objects.filter(number=number).first()
        name = hours.closed_greeting_recording if hours is not None else ""
        return recording_download(request, name, filename=f"closed-greeting-{number.pk}.wav")
    return recording_download(
        request, number.greeting_recording, filename=f"greeting-{number.pk}.wav"
    )


def hold_music_download(request, number: Number) -> HttpResponseBase:
    """The number's uploaded music on hold as WAV (8 kHz, 16-bit, mono), whole or the byte
    range asked for; NotFound when it has none or its file is gone."""
    return recording_download(request, number.hold_music, filename=f"hold-music-{number.pk}.wav")
