"""A bridged call recorded (issue 58): two channels in one WAV file, 8 kHz 16-bit, the caller
on the left and the other party on the right, from the moment of the bridge to its end.

Each end's stream hands what it hears to its channel (`tap(channel)`, set as the stream's
`on_bridged`), in its G.711 law, at C speed (a bytearray appended): a phone's RtpStream as
it relays a packet, a browser tab's stream (telephony.webrtc.leg) the same once SRTP is
unprotected and Opus, if any, transcoded. Once a FLUSH_SECONDS the
channels are written out together up to LAG_SECONDS ago, decoded and interleaved by numpy,
and the header's two sizes are rewritten in place: the file is a valid WAV of everything up
to the last flush at every moment, so a crash loses at most the last seconds. A packet is
placed by when it arrives: a channel that fell silent (a held end, a sender that stops
between talkspurts, packets lost) is filled with silence up to it, and one that runs more
than AHEAD_SECONDS early is cut, so that the channels stay together and in time with the
bridge. At the end, the file holds exactly the bridge's length.

A write that fails (the disk full, a quota, the file too large): the recording is cut there,
its file truncated back to what was written whole and its header made to say so, and it is
`incomplete`; one ERROR line says so, once. The call goes on: nothing here is the call's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
from collections.abc import Callable
from functools import partial

import numpy

from telephony.sip.rtp import LINEAR, SILENCE, TRANSCODE

logger = logging.getLogger(__name__)

RATE = 8000
CHANNELS = 2
FRAME_BYTES = 2 * CHANNELS  # one sample of each channel, 16-bit
HEADER_BYTES = 44
FLUSH_SECONDS = 1.0  # how often what was heard is written out
LAG_SECONDS = 0.2  # written up to this long ago: the jitter a packet may come late by
GAP_SAMPLES = 480  # a channel behind its packet's arrival by more (60 ms) is filled
AHEAD_SECONDS = 0.5  # a channel ahead of the clock by more is cut back (a fast sender)
CALLER, OTHER = 0, 1  # the channels: left and right

# G.711 code -> its 16-bit sample, per law, for numpy to decode a channel at once.
_DECODE = {law: numpy.frombuffer(b"".join(table), dtype="<i2") for law, table in LINEAR.items()}


def wav_header(frames: int) -> bytes:
    """The 44-byte header of a WAV of `frames` stereo 16-bit frames at 8 kHz."""
    data = frames * FRAME_BYTES
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, CHANNELS, RATE, RATE * FRAME_BYTES, FRAME_BYTES, 16)
        + b"data"
        + struct.pack("<I", data)
    )


class _Channel:
    """One end's audio not yet written, in one G.711 law (its first packet's)."""

    __slots__ = ("law", "pending", "position")

    def __init__(self) -> None:
        self.law: int | None = None
        self.pending = bytearray()
        self.position = 0  # samples written and pending together

    def take(self, count: int) -> bytes:
        """`count` samples from the front, silence where there are too few."""
        law = 0 if self.law is None else self.law
        audio = bytes(self.pending[:count])
        del self.pending[:count]
        if len(audio) < count:
            audio += SILENCE[law][:1] * (count - len(audio))
        return audio


class CallRecorder:
    """The recording of one bridge into the file at `path` (created now), from now until
    close(). `label` names the call in the log."""

    def __init__(self, path: str, *, label: str) -> None:
        self.path, self.label = path, label
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.channels = (_Channel(), _Channel())
        self.frames = 0  # frames in the file
        self.incomplete = False
        self.closed = False
        self.fd: int | None = None
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
            self._write_all(wav_header(0))
        except OSError as exc:
            self._cut(exc)
        self.task = self.loop.create_task(self._flushing())

    @property
    def seconds(self) -> float:
        return round(self.frames / RATE, 2)

    def tap(self, channel: int) -> Callable[[bytes, int], None]:
        """What a stream calls with each payload it hears while bridged (and its payload
        type), for `channel` (CALLER or OTHER)."""
        return partial(self._heard, channel)  # one Python frame a packet, not two

    def _heard(self, index: int, payload: bytes, payload_type: int) -> None:
        if self.fd is None or payload_type not in LINEAR:
            return  # cut, closed (close() lets go of the file), or not G.711
        channel = self.channels[index]
        if channel.law is None:
            channel.law = payload_type
        elif payload_type != channel.law:
            payload = payload.translate(TRANSCODE[(payload_type, channel.law)])
        # Where this packet belongs: it ends about now.
        due = int((self.loop.time() - self.started) * RATE) - len(payload)
        behind = due - channel.position
        if behind > GAP_SAMPLES:
            channel.pending += SILENCE[channel.law][:1] * behind
            channel.position += behind
        elif -behind > AHEAD_SECONDS * RATE:
            return  # a sender faster than the clock: dropped until the clock catches up
        channel.pending += payload
        channel.position += len(payload)

    async def _flushing(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            self._flush(int((self.loop.time() - self.started - LAG_SECONDS) * RATE))

    def _flush(self, until: int) -> None:
        """Write both channels up to sample `until` (silence where a channel has nothing)."""
        count = until - self.frames
        if count <= 0 or self.fd is None:
            return
        stereo = numpy.empty((count, CHANNELS), dtype="<i2")
        for index, channel in enumerate(self.channels):
            audio = channel.take(count)
            channel.position = max(channel.position, until)
            law = 0 if channel.law is None else channel.law
            stereo[:, index] = _DECODE[law][numpy.frombuffer(audio, dtype=numpy.uint8)]
        try:
            self._write_all(stereo.tobytes())
            self.frames += count
            os.pwrite(self.fd, wav_header(self.frames), 0)
        except OSError as exc:
            self.frames += getattr(exc, "written", 0) // FRAME_BYTES  # whole frames kept
            self._cut(exc)

    def _write_all(self, data: bytes) -> int:
        """Write `data` at the file's end; an OSError says how much was written (`written`)."""
        view, done = memoryview(data), 0
        while done < len(data):
            try:
                done += os.write(self.fd, view[done:])
            except OSError as exc:
                exc.written = done
                raise
        return done

    def _cut(self, exc: OSError) -> None:
        """The recording stops here, with what was written whole, and is incomplete."""
        self.incomplete = True
        logger.error(
            "%s: recording cut after %.2f s, the call goes on: %s (%s)",
            self.label,
            self.frames / RATE,
            os.strerror(exc.errno) if exc.errno else type(exc).__name__,
            self.path,
        )
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, HEADER_BYTES + self.frames * FRAME_BYTES)
                os.pwrite(self.fd, wav_header(self.frames), 0)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        for channel in self.channels:
            channel.pending.clear()

    async def close(self) -> None:
        """The bridge is over: write what is left, up to its length exactly, and close."""
        if self.closed:
            return
        self.closed = True
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        self._flush(int((self.loop.time() - self.started) * RATE))
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
