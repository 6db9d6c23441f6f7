"""Machine detection on real calls (issue 56): SIPp answers Relay's call and plays what a
callee sends (an answering machine's greeting and beep, a person's "Hello?", a fax's tone),
and a socket of the test's, which the answer's SDP names, records what Relay says, with the
time each packet came. The agent hears SIPp from SIPp's media port, so media latching is off
(its audio then goes where the SDP says: the test's socket).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from calls.models import CallEvent
from calls.states import TERMINAL_STATES
from harness.live import AgentProcess, tool, wait_until
from harness.ports import udp_port_taken
from harness.sip import Sipp, free_udp_port, pcap_from_alaw
from harness.speech import silence_wav, sox_level, speech_wav, tone_wav
from telephony.sip.rtp import wav_from_g711
from telephony.speech import Speech
from tests.telephony.conftest import sip_env, status_of, submit
from tests.telephony.rtp_recorder import Recorder
from tests.voiceapps.conftest import Reply
from webhooks.services import webhook_set

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

MESSAGE = "This is Relay. Your order is ready, and you can collect it from the shop tomorrow."
GREETING = (
    "Hello, you have reached the voicemail of Sam Jones. I cannot take your call right now. "
    "Please leave a message after the tone."
)
BEEP_HZ, BEEP_SECONDS, BEEP_PAUSE = 1000, 0.5, 0.4
A_LAW = 8


@pytest.fixture(scope="module")
def agent(tmp_path_factory, django_db_setup):
    """One telephony agent for the module, its trunk SIPp on `agent.trunk_port`."""
    workdir = tmp_path_factory.mktemp("amd-agent")
    trunk = free_udp_port()
    env = sip_env(
        workdir,
        trunk,
        SIP_MEDIA_LATCHING="false",
        WEBHOOK_ALLOW_PRIVATE="true",  # a script's hooks go to the app on loopback
        VOICE_HOOK_TIMEOUT="2",
    )
    process = AgentProcess(workdir, env)
    port = int(env["SIP_BIND"].rsplit(":", 1)[1])
    wait_until(lambda: udp_port_taken(port), deadline=30, what="the agent")
    process.trunk_port, process.workdir = trunk, workdir
    yield process
    process.stop()


@pytest.fixture(scope="module")
def message_seconds(agent) -> float:
    """How long the message is, rendered into the agent's own speech cache."""
    return len(Speech(agent.workdir / "tts").render(MESSAGE, "en")[A_LAW]) / 8000


def wav_of(packets, path: Path) -> Path:
    audio = b"".join(payload for _, kind, payload in packets if kind == A_LAW)
    path.write_bytes(wav_from_g711(audio, A_LAW))
    return path


def sox(*arguments: str) -> None:
    subprocess.run([tool("sox"), *arguments], check=True, timeout=60, capture_output=True)  # noqa: S603


def seconds_of(path: Path) -> float:
    return sox_level(path).seconds


@dataclass
class Answer:
    pcap: Path
    beep: tuple[float, float] | None  # (start, end), seconds into the pcap


def answer_pcap(tmp_path: Path, parts: list[Path], *, beep_after: int | None = None) -> Answer:
    """`parts` (8 kHz WAVs) one after another and 12 s of a quiet line, as SIPp's capture; the
    beep is the part at `beep_after`, if any."""
    tail = silence_wav(tmp_path / "tail.wav", 12)
    whole, alaw = tmp_path / "answer.wav", tmp_path / "answer.alaw"
    sox(*map(str, [*parts, tail]), str(whole))
    sox(str(whole), "-e", "a-law", "-t", "raw", str(alaw))
    beep = None
    if beep_after is not None:
        start = sum(seconds_of(part) for part in parts[:beep_after])
        beep = (start, start + seconds_of(parts[beep_after]))
    return Answer(pcap_from_alaw(alaw.read_bytes(), tmp_path / "answer.pcap"), beep)


# How much earlier than the wall clock says SIPp's beep may end: SIPp's player runs a little
# ahead of real time (30 ms over the 8 s before the beep, measured here), and its ACK's time
# is its message log's.
SLACK = 0.06


def ack_received(far_end: Sipp) -> float:
    """When SIPp received Relay's ACK, and so began to play (the ACK's action): the time its
    message log gives the message, in seconds since the epoch."""
    stamp = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)"
    found = re.search(
        rf"-{{20,}} {stamp}\n\w+ message received \[\d+\] bytes :\n\nACK ",
        far_end.messages.read_text(),
    )
    assert found, far_end
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()  # noqa: DTZ007 - SIPp logs local time, as timestamp() reads it


def called(agent, tmp_path, user, answer: Answer, call_id: str, mode: str, **what):
    """Relay calls SIPp, which plays `answer`; (the call once ended, the recorder, when SIPp
    began to play, in wall-clock seconds)."""
    recorder = Recorder()
    far_end = Sipp(
        tmp_path / "sipp",
        "answer_greeting",
        port=agent.trunk_port,
        audio_port=recorder.port,
        pcap=answer.pcap,
    )
    try:
        call = submit(user, call_id, **({"message": MESSAGE} | what), machineDetection=mode)
        wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=60, what="the call's end")
        assert far_end.finish() == 0, far_end
    finally:
        far_end.stop()
        recorder.close()
    return call, recorder, ack_received(far_end)


def test_a_message_left_on_an_answering_machine_is_said_whole_after_its_beep(
    agent, tmp_path, user, message_seconds
):
    greeting = speech_wav(tmp_path / "greeting.wav", GREETING, before=0.2)
    parts = [
        greeting,
        silence_wav(tmp_path / "pause.wav", BEEP_PAUSE),
        tone_wav(tmp_path / "beep.wav", BEEP_SECONDS, BEEP_HZ),
    ]
    answer = answer_pcap(tmp_path, parts, beep_after=2)

    call, recorder, started = called(agent, tmp_path, user, answer, "amd-machine", "leave_message")

    beep_start, beep_end = (started + at for at in answer.beep)
    *over_the_greeting, message = recorder.bursts()
    # Said over the greeting at first (at once, as to a person), cut once the detector knew:
    assert over_the_greeting and over_the_greeting[-1][-1][0] < beep_start
    # then the message whole, from the beep's end: nothing of it before, all of it after.
    assert beep_end - SLACK <= message[0][0] <= beep_end + 1.0, message[0][0] - beep_end
    recorded = wav_of(message, tmp_path / "after-beep.wav")
    level = sox_level(recorded)
    assert level.seconds >= message_seconds - 0.05, (level.seconds, message_seconds)
    assert level.rms > 0.01
    assert [p for p in recorder.packets if beep_start <= p[0] < beep_end - SLACK] == []
    assert (call.status, call.answered_as) == ("completed", "machine")
    detected = CallEvent.objects.get(call=call, kind="detected")
    assert (detected.status, detected.data) == ("in_progress", {"answeredBy": "machine"})


def test_a_person_saying_hello_hears_the_message_within_a_second_of_the_answer(
    agent, tmp_path, user, message_seconds
):
    hello = speech_wav(tmp_path / "hello.wav", "Hello?", before=0.3)
    answer = answer_pcap(tmp_path, [hello])

    call, recorder, started = called(agent, tmp_path, user, answer, "amd-person", "leave_message")

    [message] = recorder.bursts()  # said once, never cut
    assert message[0][0] - started <= 1.0, message[0][0] - started
    level = sox_level(wav_of(message, tmp_path / "heard.wav"))
    assert level.seconds >= message_seconds - 0.05
    assert (call.status, call.answered_as, call.failure_reason) == ("completed", "human", "")


def test_a_fax_is_hung_up_on_when_a_message_is_to_be_left(agent, tmp_path, user, message_seconds):
    cycle = [tone_wav(tmp_path / "cng.wav", 0.5, 1100), silence_wav(tmp_path / "off.wav", 3)]
    answer = answer_pcap(tmp_path, cycle * 3)

    call, recorder, _ = called(agent, tmp_path, user, answer, "amd-fax", "leave_message")

    assert (call.status, call.answered_as, call.failure_reason) == ("completed", "fax", "fax")
    said = len(recorder.packets) * 0.02
    assert said < message_seconds - 1, said  # hung up before the message was through


def test_a_script_starts_once_it_is_known_who_answered_and_its_hooks_say_who(
    agent, tmp_path, user, app
):
    webhook_set(user=user, url=app.url("/events"), events=["incoming_call"])  # signs the hooks
    who = app.answer("/who", Reply(body=[{"say": {"text": "Hello, this is Relay."}}]))
    hello = speech_wav(tmp_path / "hello.wav", "Yes, who is this?", before=0.3)
    answer = answer_pcap(tmp_path, [hello])

    call, recorder, started = called(
        agent, tmp_path, user, answer, "amd-script", "detect", script=[{"redirect": {"url": who}}]
    )

    [asked] = app.bodies("/who")
    assert (asked["answeredBy"], asked["AnsweredBy"]) == ("human", "human")
    assert (asked["callId"], asked["verb"]) == ("amd-script", "redirect")
    assert recorder.packets and recorder.packets[0][0] > started  # the script, after it
    assert (call.status, call.answered_as) == ("completed", "human")


def test_a_far_end_that_sends_no_audio_is_unknown_after_four_seconds(
    agent, tmp_path, user, message_seconds
):
    recorder = Recorder()
    far_end = Sipp(
        tmp_path / "sipp", "answer_media_at", port=agent.trunk_port, audio_port=recorder.port
    )
    try:
        call = submit(user, "amd-mute", message=MESSAGE, machineDetection="leave_message")
        wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=60, what="the call's end")
        assert far_end.finish() == 0, far_end
    finally:
        far_end.stop()
        recorder.close()

    assert (call.status, call.answered_as, call.failure_reason) == ("completed", "unknown", "")
    detected = CallEvent.objects.get(call=call, kind="detected")
    assert detected.detail == "too little audio in 4 s"
    [message] = recorder.bursts()  # said at once, whole, and not again
    assert len(message) * 0.02 >= message_seconds - 0.05
    assert 4.0 <= call.duration <= message_seconds + 2
