"""A recorded forwarded call through the SIP agent (issue 58): SIPp calls a number that
records its calls, SIPp on the trunk answers as the target, each playing a tone of its own
(sox). Both hear the announcement, spoken through the speech cache, then the bridge is
recorded: one WAV, 8 kHz 16-bit, the caller's tone on the left channel and the target's on
the right (sox `remix 1` / `remix 2` and `stat`), as long as the bridge. A disk that fills up
mid-recording (a tmpfs of a few kB) cuts it: the call goes on, the recording is kept as far
as it was written, marked incomplete, and one ERROR line says so."""

from __future__ import annotations

import contextlib
import re
import subprocess
import wave
from pathlib import Path

import pytest

from calls.models import Call, Recording, RecordingKind
from harness.live import wait_until
from harness.sip import Sipp, pcap_from_alaw
from history.models import AnsweredBy, CallStatus
from telephony.speech import Speech
from tests.factories import NumberFactory
from tests.telephony.conftest import agent_relay, bridge_log, call_in, wait_for_records
from voiceapps.services import voice_app_set
from voiceapps.verbs import script_check

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TARGET = "+441134960200"
CALLER_HZ, TARGET_HZ = 440, 1200
ANNOUNCEMENT = "Calls to the shop are recorded."


def tone_pcap(path: Path, hertz: int, seconds: float = 9.0) -> Path:
    """A sine tone as an A-law RTP capture SIPp plays (sox makes the tone)."""
    synth = ["-t", "al", "-", "synth", str(seconds), "sine", str(hertz), "vol", "0.5"]
    made = subprocess.run(  # noqa: S603
        ["sox", "-n", "-r", "8000", "-c", "1", *synth],  # noqa: S607
        check=True,
        capture_output=True,
    )
    alaw = made.stdout
    return pcap_from_alaw(alaw, path)


def channel_stat(wav: Path, channel: int) -> dict[str, float]:
    """sox's `stat` of one channel of `wav`: its RMS amplitude and rough frequency."""
    out = subprocess.run(  # noqa: S603
        ["sox", str(wav), "-n", "remix", str(channel), "stat"],  # noqa: S607
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    values = {}
    for line in out.splitlines():
        name, _, value = line.partition(":")
        with contextlib.suppress(ValueError):
            values[name.strip()] = float(value)
    return {"rms": values["RMS     amplitude"], "hz": values["Rough   frequency"]}


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    process = agent_relay(tmp_path_factory.mktemp("call-recording"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def tones(tmp_path_factory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("tones")
    return tone_pcap(where / "caller.pcap", CALLER_HZ), tone_pcap(where / "target.pcap", TARGET_HZ)


def recorded_number(user):
    return NumberFactory(
        owner=user,
        alias="Shop",
        forward_targets=[TARGET],
        forward_ring_seconds=5,
        recording_enabled=True,
        recording_announce=ANNOUNCEMENT,
    )


def recorded_call(relay, tmp_path, number, tones, *, talk_ms=6000):
    """The caller's SIPp and the target's, each playing its tone from its answer; the
    caller hangs up `talk_ms` after its answer. The call's record once written."""
    caller_tone, target_tone = tones
    target = Sipp(
        tmp_path / "target",
        "forward_target",
        port=relay.trunk_port,
        answering=re.escape(TARGET),
        codec="8",
        codec_name="PCMA",
        answer_ms=300,
        actions=f'  <nop><action><exec play_pcap_audio="{target_tone}"/></action></nop>',
    )
    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_message",
        number.number,
        greeting_ms=0,
        message_ms=talk_ms,
        pcap=caller_tone,
    )
    assert caller.finish() == 0, caller
    assert target.finish() == 0, target
    [record] = wait_for_records(number, 1)
    return record


def recording_of(record) -> Recording:
    """The call's recording once its bridge has ended (no longer incomplete-in-progress: its
    seconds stored)."""
    return wait_until(
        lambda: Recording.objects.filter(
            call_id=record.pk, kind=RecordingKind.CALL, seconds__isnull=False
        ).first(),
        deadline=15,
        what="the call's recording to be stored",
    )


def test_each_channel_holds_its_own_partys_tone_after_the_announcement(
    relay, tmp_path, user, tones
):
    number = recorded_number(user)

    record = recorded_call(relay, tmp_path, number, tones)

    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        TARGET,
    )
    recording = recording_of(record)
    assert (recording.incomplete, recording.transcript_status) == (False, "off")
    wav_path = relay.workdir / "recordings" / recording.name
    with wave.open(str(wav_path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (2, 2, 8000)
        wav_seconds = wav.getnframes() / 8000
    # As long as the bridge (the agent's log of it, in whole seconds), and as stored.
    log = relay.log_path.read_text()
    bridged = int(bridge_log(log, record.sip_call_id).group(1))
    assert abs(wav_seconds - recording.seconds) < 0.01
    assert abs(wav_seconds - bridged) <= 0.6, (wav_seconds, bridged)
    assert wav_seconds >= 2.0
    # The announcement came first: the caller was answered that long before the bridge.
    call = Call.objects.get(pk=record.pk)
    answered = (call.ended_at - call.answered_at).total_seconds()
    assert answered - wav_seconds >= 1.0, (answered, wav_seconds)
    assert re.search(
        rf"inbound call {re.escape(record.sip_call_id)}: the recording announced", log
    ), log
    # ... spoken through the speech cache, in the owner's words.
    speech = Speech(relay.workdir / "tts")
    key = speech.key(ANNOUNCEMENT, "en")
    assert list((relay.workdir / "tts").glob(f"{key}.*")), key
    # Each party on its own channel: the caller's tone left, the target's right.
    left, right = channel_stat(wav_path, 1), channel_stat(wav_path, 2)
    assert left["rms"] > 0.1 and right["rms"] > 0.1, (left, right)
    assert abs(left["hz"] - CALLER_HZ) < 60, left
    assert abs(right["hz"] - TARGET_HZ) < 100, right


def test_a_number_that_does_not_record_makes_no_recording(relay, tmp_path, user, tones):
    number = recorded_number(user)
    number.recording_enabled = False
    number.save(update_fields=["recording_enabled"])

    record = recorded_call(relay, tmp_path, number, tones, talk_ms=2500)

    assert record.answered_by == AnsweredBy.FORWARD
    assert not Recording.objects.filter(call_id=record.pk).exists()
    assert not re.search(
        rf"inbound call {re.escape(record.sip_call_id)}: the recording announced",
        relay.log_path.read_text(),
    )


def test_a_scripts_dial_with_record_is_recorded_after_the_announcement(
    relay, tmp_path, user, tones
):
    number = NumberFactory(owner=user, alias="Shop")  # the number itself records nothing
    dial = {"targets": [TARGET], "timeout": 10, "callerId": "caller", "record": True}
    voice_app_set(number=number, script=script_check([{"dial": dial}]))

    record = recorded_call(relay, tmp_path, number, tones, talk_ms=5000)

    assert record.answered_by == "app"
    recording = recording_of(record)
    wav_path = relay.workdir / "recordings" / recording.name
    with wave.open(str(wav_path)) as wav:
        assert wav.getnchannels() == 2
        assert abs(wav.getnframes() / 8000 - recording.seconds) < 0.01
    assert recording.seconds >= 1.5
    assert abs(channel_stat(wav_path, 1)["hz"] - CALLER_HZ) < 60
    assert abs(channel_stat(wav_path, 2)["hz"] - TARGET_HZ) < 100
    # The default announcement, from the speech cache.
    key = Speech(relay.workdir / "tts").key("This call may be recorded.", "en")
    assert list((relay.workdir / "tts").glob(f"{key}.*")), key


@pytest.fixture
def tiny_disk(tmp_path):
    """A tmpfs of 24 kB for the recordings: about half a second of a stereo WAV."""
    where = tmp_path / "tiny-disk"
    where.mkdir()
    mounted = subprocess.run(  # noqa: S603
        ["mount", "-t", "tmpfs", "-o", "size=24k", "tmpfs", str(where)],  # noqa: S607
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", str(where)], check=False)  # noqa: S603, S607


def test_a_disk_that_fills_up_cuts_the_recording_and_the_call_goes_on(
    tmp_path, user, tones, tiny_disk, django_db_setup
):
    (tmp_path / "relay").mkdir()
    process = agent_relay(
        tmp_path / "relay", RECORDING_STORAGE_OPTIONS=f'{{"location": "{tiny_disk}"}}'
    )
    try:
        number = recorded_number(user)
        record = recorded_call(process, tmp_path, number, tones, talk_ms=5000)
        recording = recording_of(record)
        log = process.log_path.read_text()
    finally:
        process.stop()

    # The call went on to the caller's hang-up, answered by the target.
    assert (record.status, record.answered_by) == (CallStatus.ANSWERED, AnsweredBy.FORWARD)
    assert record.duration >= 2  # seconds bridged, well past the cut
    assert recording.incomplete is True
    with wave.open(str(tiny_disk / recording.name)) as wav:  # still a valid WAV
        kept = wav.getnframes() / 8000
    assert 0 < kept < 1.0
    assert abs(kept - recording.seconds) < 0.01
    errors = [line for line in log.splitlines() if " ERROR " in line and "recording cut" in line]
    assert len(errors) == 1, errors
    assert "No space left on device" in errors[0]
