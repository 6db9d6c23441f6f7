"""The recorder of a bridged call (telephony.sip.recorder, issue 58), fed as a bridge feeds it:
a WAV valid while it is being written (a crash loses at most the last second), channels kept
in time when one falls silent, and a write that fails cutting it once, with one ERROR line.
A whole call through the agent is tests/telephony/test_call_recording.py."""

from __future__ import annotations

import asyncio
import logging
import os
import wave
from pathlib import Path

import pytest

from telephony.sip.recorder import CALLER, OTHER, CallRecorder

LOUD_MU, SILENT_MU = 0x10, 0xFF


def samples(path: Path, channel: int, start: float, end: float) -> list[int]:
    with wave.open(str(path)) as wav:
        wav.setpos(int(start * 8000))
        frames = wav.readframes(int((end - start) * 8000))
    return [
        int.from_bytes(frames[i + 2 * channel : i + 2 * channel + 2], "little", signed=True)
        for i in range(0, len(frames), 4)
    ]


def loud(values: list[int]) -> bool:
    return max(map(abs, values)) > 10000


async def feed(recorder, seconds: float, *, right=lambda t: True) -> None:
    """Both ends' 20 ms packets for `seconds`, the right one only while `right(t)`."""
    left, other = recorder.tap(CALLER), recorder.tap(OTHER)
    for n in range(round(seconds / 0.02)):
        left(bytes([LOUD_MU]) * 160, 0)
        if right(n * 0.02):
            other(bytes([LOUD_MU]) * 160, 0)
        await asyncio.sleep(0.02)


def test_the_wav_is_valid_while_it_is_written(tmp_path):
    path = tmp_path / "call.wav"

    async def run():
        recorder = CallRecorder(str(path), label="test")
        await feed(recorder, 1.7)
        with wave.open(str(path)) as wav:  # mid-call, as a crash would leave it
            during = wav.getnframes() / 8000
        size = path.stat().st_size
        riff = int.from_bytes(path.read_bytes()[4:8], "little")
        await recorder.close()
        return during, size, riff, recorder

    during, size, riff, recorder = asyncio.run(run())

    assert 0.7 <= during <= 1.7, during  # written up to 0.2 s before the last flush
    assert riff == size - 8
    with wave.open(str(path)) as wav:
        assert abs(wav.getnframes() / 8000 - recorder.seconds) <= 0.005  # rounded to 0.01 s
    assert abs(recorder.seconds - 1.7) < 0.15


def test_a_channel_that_falls_silent_is_filled_and_stays_in_time(tmp_path):
    path = tmp_path / "call.wav"

    async def run():
        recorder = CallRecorder(str(path), label="test")
        # the other party sends nothing from 0.4 s to 1.2 s (a hold, a sender that stops)
        await feed(recorder, 1.8, right=lambda t: not 0.4 <= t < 1.2)
        await recorder.close()

    asyncio.run(run())

    assert loud(samples(path, 0, 0.6, 1.0))  # the caller went on
    assert not loud(samples(path, 1, 0.6, 1.0))  # silence where the other party sent nothing
    assert loud(samples(path, 1, 1.35, 1.6))  # and their sound again where it came back


def test_a_write_that_fails_cuts_the_recording_once_with_one_error_line(caplog):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")

    async def run():
        recorder = CallRecorder("/dev/full", label="inbound call x")
        await feed(recorder, 1.3)  # the taps go on being called: nothing more is tried
        await recorder.close()
        return recorder

    with caplog.at_level(logging.ERROR, logger="telephony.sip.recorder"):
        recorder = asyncio.run(run())

    assert (recorder.incomplete, recorder.seconds) == (True, 0)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "recording cut after 0.00 s, the call goes on: No space left on device" in (
        errors[0].getMessage()
    )
