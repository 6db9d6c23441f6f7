"""Inbound calls to the numbers (docs/telephony.md): how long they ring, where they may be
forwarded, and voicemail: its messages, how long they are kept and where they are stored."""

from relay.settings.base import VAR_DIR
from relay.settings.readers import (
    choice,
    json_object,
    must,
    number,
    rate,
    seconds,
    text,
    whole_number,
)

# Inbound calls to the numbers ring this long, then voicemail answers.
INBOUND_RING_SECONDS = seconds("INBOUND_RING_SECONDS", 20.0, above=True)
# Forwarding settings a user may store (PUT /api/numbers/:id/forwarding); each is checked
# against the dialing policy, so the limit also caps probing it.
RATE_LIMIT_FORWARDING_PER_USER = rate("RATE_LIMIT_FORWARDING_PER_USER", "30/h")

# Music on hold a number's owner uploads (PUT /api/numbers/:id/hold-music, issue 58): the
# largest WAV file taken (a larger body is answered 413 before it is read), and the longest.
HOLD_MUSIC_MAX_BYTES = whole_number(
    "HOLD_MUSIC_MAX_BYTES", 10 * 1024 * 1024, maximum=2**31 - 1, unit=" (bytes)"
)
HOLD_MUSIC_MAX_SECONDS = seconds("HOLD_MUSIC_MAX_SECONDS", 300.0, above=True, maximum=3600.0)

VOICEMAIL_MAX_SECONDS = seconds("VOICEMAIL_MAX_SECONDS", 120.0, above=True)
VOICEMAIL_SILENCE_SECONDS = seconds("VOICEMAIL_SILENCE_SECONDS", 5.0, above=True)
VOICEMAIL_RETENTION_DAYS = whole_number(
    "VOICEMAIL_RETENTION_DAYS", 30, maximum=36500, unit=" (days)"
)
# Recordings of bridged calls (issue 58): purge_expired deletes older ones with their rows.
CALL_RECORDING_RETENTION_DAYS = whole_number(
    "CALL_RECORDING_RETENTION_DAYS", 30, maximum=36500, unit=" (days)"
)
# What both parties hear before a recorded bridge when the number's owner set no text.
RECORDING_ANNOUNCEMENT = "This call may be recorded."

# Transcripts of messages (history.transcription), made by the worker after a message is
# stored, never by the agent: the engine (`off`: none; pocketsphinx kept for one release as
# a fallback, docs/decisions.md), an operator's own CTranslate2 Whisper model directory in
# place of the bundled tiny.en (its sha256 not checked), how many run at once across every
# worker, and the longest message transcribed.
TRANSCRIBE_ENGINE = choice("TRANSCRIBE_ENGINE", "whisper", ("whisper", "pocketsphinx", "off"))
TRANSCRIBE_MODEL_DIR = text("TRANSCRIBE_MODEL_DIR", "")
must(
    not TRANSCRIBE_MODEL_DIR or TRANSCRIBE_ENGINE == "whisper",
    f"TRANSCRIBE_MODEL_DIR is a Whisper model: it needs TRANSCRIBE_ENGINE=whisper, "
    f"not {TRANSCRIBE_ENGINE!r}",
)
TRANSCRIBE_CONCURRENCY = whole_number("TRANSCRIBE_CONCURRENCY", 1, maximum=64)
TRANSCRIBE_MAX_SECONDS = seconds("TRANSCRIBE_MAX_SECONDS", 180.0, above=True)
# Each telephony agent's child processes that transcribe its speech gathers' utterances
# (telephony.listening), started as gathers need them: a second one when two utterances end
# together (each child holds the model, about 350 MB).
SPEECH_GATHER_PROCESSES = whole_number("SPEECH_GATHER_PROCESSES", 2, maximum=16)
# A voicemail mail (history.notifications) attaches the WAV up to this size, else links it.
VOICEMAIL_EMAIL_MAX_MB = number("VOICEMAIL_EMAIL_MAX_MB", 5.0, maximum=100.0, what="megabytes")

# Voicemail recordings go through Django's storage API: files under var/recordings by
# default, any django-storages backend in production (its options as JSON).
RECORDING_STORAGE_BACKEND = text(
    "RECORDING_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage"
)
RECORDING_STORAGE_OPTIONS = json_object(
    "RECORDING_STORAGE_OPTIONS", {"location": str(VAR_DIR / "recordings")}
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "recordings": {"BACKEND": RECORDING_STORAGE_BACKEND, "OPTIONS": RECORDING_STORAGE_OPTIONS},
}
