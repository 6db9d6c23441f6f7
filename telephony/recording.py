"""What the far end of a call says, recorded: voicemail's message (telephony.inbound.
voicemail) and a script's `record` (telephony.scripted) alike. The stream keeps what it
hears from `Recording(stream)` on; the loop that decides when to stop is the caller's (the
call's end, a key, the maximum, VOICEMAIL_SILENCE_SECONDS of silence). Nothing but silence
is no recording; a message ended by silence keeps SILENCE_KEPT of it."""

from __future__ import annotations

import asyncio
import uuid

from django.core.files.base import ContentFile

from core.recordings import recordings_storage
from telephony.sip.rtp import RtpStream, wav_from_g711

SILENCE_KEPT = 0.5  # seconds of the silence that ended a message kept at its end


class Recording:
    """The far end's audio from now on, until `take()`."""

    def __init__(self, stream: RtpStream, *, max_seconds: float, silence: float) -> None:
        self.stream, self.silence = stream, silence
        self.loop = asyncio.get_running_loop()
        stream.record()
        self.started = self.loop.time()
        self.stop_at = self.started + max_seconds

    def left(self) -> float:
        """Seconds until the recording must stop (its maximum, or the silence that ends
        it); 0 or less when it must stop now."""
        now = self.loop.time()
        return min(self.stop_at - now, self.silence - (now - self.stream.last_sound))

    def take(self, *, trim: bool) -> bytes | None:
        """Stop; the audio heard (G.711, the call's codec), None when it was all silence.
        With `trim`, or when silence ended it, only SILENCE_KEPT past the last sound."""
        stream = self.stream
        audio = bytes(stream.recording or b"")
        stream.recording = None
        if stream.last_sound <= self.started:
            return None
        if trim or self.loop.time() - stream.last_sound >= self.silence:
            audio = audio[: int((stream.last_sound - self.started + SILENCE_KEPT) * 8000)]
        return audio


async def recording_save(audio: bytes, payload_type: int, *, name: str = "") -> tuple[str, float]:
    """`audio` (G.711 of `payload_type`) as a WAV file in the recordings storage, named
    `name`.wav (a new random name by default): its name there, and its seconds."""
    wav = wav_from_g711(audio, payload_type)
    saved = await asyncio.to_thread(
        recordings_storage().save, f"{name or uuid.uuid4().hex}.wav", ContentFile(wav)
    )
    return saved, round(len(audio) / 8000, 2)
