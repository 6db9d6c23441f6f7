"""A greeting recorded by phone (issue 44): the owner calls their number, opens the mailbox
with `*`, the PIN and `#`, presses 3, speaks after the tone (SIPp's g711a.pcap), ends with
`#`, hears it played back and keeps it (1), records again (2) or goes back to the spoken
greeting (3), all by RFC 4733 keys from SIPp's own captures. The next caller hears the
recording: a socket of the test is that caller's media, and sox measures what it heard."""

from __future__ import annotations

import array
import shutil
import socket
import subprocess
import threading
import wave
from pathlib import Path

import pytest
from django.contrib.auth.hashers import make_password

from harness.live import RelayProcess, wait_until
from harness.sip import MESSAGE_SECONDS, SIPP_SHARE, free_udp_port, presses
from telephony.inbound.mailbox import RECORD_PROMPT, RECORDER
from telephony.speech import Speech
from tests.factories import NumberFactory, wav_bytes
from tests.telephony.conftest import call_in, sip_env, wait_for_records
from virtual_numbers.models import GREETING_PREFIX, Number, OpeningHours

pytestmark = [
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

PIN_PROMPT = "Please enter your PIN, then press the hash key."
BEEP_SECONDS = 0.4
PIN_CHECK_SECONDS = 0.5  # the agent's Argon2 check of the PIN, about
SILENCE_SECONDS = 8  # the agent's VOICEMAIL_SILENCE_SECONDS: how late the speech may start
SPEAK_AFTER_TONE = 2.5  # when the caller starts speaking, after the tone as the test reckons it


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; calls ring 2 s, and the silence that ends a recording
    is 8 s, so that the caller's speech may start a little later than the test reckons."""
    workdir = tmp_path_factory.mktemp("greeting")
    env = sip_env(
        workdir, free_udp_port(), INBOUND_RING_SECONDS=2, VOICEMAIL_SILENCE_SECONDS=SILENCE_SECONDS
    )
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.workdir, process.agent = workdir, env["SIP_BIND"]
    yield process
    process.stop()


@pytest.fixture
def number(real_hashers, user, relay):
    """A number of `user` with PIN 1234 (hashed as the agent checks it) and the default
    greeting, long enough for `*` to be pressed during it. The relay's greetings folder is
    emptied of the files earlier tests left (their numbers went with their database)."""
    shutil.rmtree(relay.workdir / "recordings" / GREETING_PREFIX, ignore_errors=True)
    return NumberFactory(owner=user, pin_hash=make_password("1234"))


def spoken_seconds(text: str, tmp_path) -> float:
    return len(Speech(tmp_path / "tts").render(text, "en")[8]) / 8000


class Caller:
    """What a caller does after the answer, as SIPp actions, with the time each happens
    (seconds from the ACK) as the test reckons it."""

    def __init__(self) -> None:
        self.actions: list[str] = []
        self.at = 0.0

    def wait_until(self, at: float) -> Caller:
        if at > self.at:
            self.actions.append(f'  <pause milliseconds="{int((at - self.at) * 1000)}"/>')
            self.at = at
        return self

    def wait(self, seconds: float) -> Caller:
        return self.wait_until(self.at + seconds)

    def press(self, keys: str) -> Caller:
        self.actions.append(presses(keys))
        self.at += 0.25 * (len(keys) - 1)
        return self

    def speak(self) -> Caller:
        """SIPp's sample speech (MESSAGE_SECONDS), from now on; a key pressed later stops it."""
        self.actions.append(
            f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/g711a.pcap"/></action></nop>'
        )
        return self

    def call(self, relay, tmp_path, dialled: str, sdp_port="[media_port]"):
        return call_in(
            relay.agent,
            tmp_path,
            "caller_hangs_up",
            dialled,
            sdp_port=sdp_port,
            actions="\n".join(self.actions),
        )


def record_greeting(caller: Caller, *, tone_at: float, seconds: float | None = None) -> Caller:
    """Speak after the tone (expected at `tone_at`), for `seconds` (all the sample speech by
    default), then press `#`."""
    caller.wait_until(tone_at + SPEAK_AFTER_TONE).speak()
    caller.wait(seconds if seconds is not None else MESSAGE_SECONDS + 0.3).press("#")
    return caller


def open_mailbox_and_press_3(tmp_path) -> tuple[Caller, float]:
    """`*`, the PIN, `#` and 3 a second after the answer: all typed ahead, so the mailbox
    goes straight from the PIN to the greeting's recorder (3 while the message count is
    said). Returns the caller and when the tone should end."""
    caller = Caller().wait_until(1.0).press("*1234#3")
    tone_at = (
        1.0
        + spoken_seconds(PIN_PROMPT, tmp_path)
        + PIN_CHECK_SECONDS
        + spoken_seconds(RECORD_PROMPT, tmp_path)
        + BEEP_SECONDS
    )
    return caller, tone_at


def greetings_stored(relay) -> list[Path]:
    return sorted((relay.workdir / "recordings" / GREETING_PREFIX).glob("*.wav"))


def stored_greeting(number) -> Number:
    return wait_until(
        lambda: (found := Number.objects.get(pk=number.pk)).greeting_recording and found,
        deadline=30,
        what="the recorded greeting to be stored",
    )


def wav_samples(path: Path) -> array.array:
    with wave.open(str(path)) as wav:
        return array.array("h", wav.readframes(wav.getnframes()))


def sox_stat(path: Path, *effects: str) -> dict[str, float]:
    """sox's `stat` of the WAV file `path` (after `effects`): "Length (seconds)", "RMS
    amplitude", ..."""
    done = subprocess.run(  # noqa: S603 - sox, with arguments of our own
        ["sox", str(path), "-n", *effects, "stat"],  # noqa: S607
        capture_output=True,
        text=True,
        check=True,
    )
    stats = {}
    for line in done.stderr.splitlines():
        name, _, value = line.partition(":")
        try:
            stats[" ".join(name.split())] = float(value)
        except ValueError:
            continue
    return stats


class Listener:
    """The next caller's ear: a UDP socket that keeps the payload of every PCMA packet
    Relay sends it, in order of sequence number."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", free_udp_port()))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.packets: list[tuple[int, bytes]] = []
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.closed.is_set():
            try:
                data = self.sock.recv(2048)
            except TimeoutError:
                continue
            if len(data) > 12 and data[1] & 0x7F == 8:  # PCMA
                self.packets.append((int.from_bytes(data[2:4], "big"), data[12:]))

    def wav(self, path: Path) -> Path:
        """What was heard, as 8 kHz 16-bit WAV (sox decodes the A-law)."""
        self.closed.set()
        self.thread.join()
        self.sock.close()
        first = self.packets[0][0]
        ordered = sorted(self.packets, key=lambda p: (p[0] - first) % 65536)
        raw = path.with_suffix(".alaw")
        raw.write_bytes(b"".join(payload for _, payload in ordered))
        subprocess.run(  # noqa: S603 - sox, with arguments of our own
            ["sox", "-t", "raw", "-r", "8000", "-e", "a-law", "-c", "1", str(raw)]  # noqa: S607
            + ["-b", "16", str(path)],
            check=True,
        )
        return path


def correlation(heard: array.array, recorded: array.array) -> float:
    """The best normalised correlation of `recorded` with the start of `heard`, shifted by
    up to five 20 ms frames either way (a packet more or less at the start)."""
    best = 0.0
    for shift in range(-5 * 160, 5 * 160 + 1, 160):
        a = heard[max(shift, 0) :]
        b = recorded[max(-shift, 0) :]
        n = min(len(a), len(b))
        if n < 8000:
            continue
        dot = sum(x * y for x, y in zip(a[:n], b[:n], strict=True))
        norm = (sum(x * x for x in a[:n]) * sum(y * y for y in b[:n])) ** 0.5
        best = max(best, dot / norm if norm else 0.0)
    return best


def test_a_greeting_recorded_by_phone_and_kept_is_what_the_next_caller_hears(
    relay, tmp_path, number
):
    caller, tone_at = open_mailbox_and_press_3(tmp_path)
    record_greeting(caller, tone_at=tone_at)
    caller.wait(1.0).press("1")  # while it is played back: keep it
    caller.wait(5.0)

    owner = caller.call(relay, tmp_path, number.number)

    assert owner.finish(90) == 0, owner
    kept = stored_greeting(number)
    assert kept.greeting_recording.startswith(GREETING_PREFIX)
    assert abs(kept.greeting_recording_seconds - MESSAGE_SECONDS) <= 1
    [file] = greetings_stored(relay)
    assert file == relay.workdir / "recordings" / kept.greeting_recording
    assert sox_stat(file)["RMS amplitude"] > 0.01  # the pcap's speech, not silence
    # The owner's call is answered, and leaves no message of its own.
    [record] = wait_for_records(number, 1)
    assert (record.status, record.recording) == ("answered", "")

    # The next caller hears the recording in place of the text greeting, then the beep.
    Number.objects.filter(pk=number.pk).update(greeting="Hi.")
    listener = Listener()
    seconds = kept.greeting_recording_seconds
    listening = Caller().wait(seconds + BEEP_SECONDS + 2.5)
    next_caller = listening.call(relay, tmp_path, number.number, sdp_port=listener.port)
    assert next_caller.finish(60) == 0, next_caller
    heard = listener.wav(tmp_path / "heard.wav")

    # From the first packet to the end of the beep (the silence after it trimmed):
    until_beep = sox_stat(heard, "reverse", "silence", "1", "0.02", "1%", "reverse")
    assert abs(until_beep["Length (seconds)"] - (seconds + BEEP_SECONDS)) <= 0.5
    spoken = spoken_seconds("Hi.", tmp_path) + BEEP_SECONDS
    assert until_beep["Length (seconds)"] - spoken > 3  # not the text greeting
    # As loud as the recording, and the same sound.
    greeting_heard = sox_stat(heard, "trim", "0", str(seconds))
    recorded = sox_stat(file)
    assert greeting_heard["RMS amplitude"] == pytest.approx(recorded["RMS amplitude"], rel=0.2)
    assert correlation(wav_samples(heard), wav_samples(file)) > 0.9


def test_recording_again_keeps_only_the_second_recording(relay, tmp_path, number):
    caller, tone_at = open_mailbox_and_press_3(tmp_path)
    record_greeting(caller, tone_at=tone_at, seconds=3.0)  # `#` stops SIPp's speech at 3 s
    caller.wait(1.0).press("2")  # while it is played back: record again
    again_at = caller.at + spoken_seconds(RECORD_PROMPT, tmp_path) + BEEP_SECONDS
    record_greeting(caller, tone_at=again_at)
    caller.wait(1.0).press("1")
    caller.wait(5.0)

    owner = caller.call(relay, tmp_path, number.number)

    assert owner.finish(120) == 0, owner
    kept = stored_greeting(number)
    assert abs(kept.greeting_recording_seconds - MESSAGE_SECONDS) <= 1  # the second, whole
    assert [path.name for path in greetings_stored(relay)] == [Path(kept.greeting_recording).name]


def test_going_back_to_the_spoken_greeting_removes_the_recorded_one(relay, tmp_path, number):
    folder = relay.workdir / "recordings" / GREETING_PREFIX
    folder.mkdir(parents=True, exist_ok=True)
    old = folder / f"old-{number.pk}.wav"
    old.write_bytes(wav_bytes(4.0))  # what the owner hears first, and presses `*` during
    Number.objects.filter(pk=number.pk).update(
        greeting_recording=f"{GREETING_PREFIX}{old.name}", greeting_recording_seconds=4.0
    )
    caller, tone_at = open_mailbox_and_press_3(tmp_path)
    record_greeting(caller, tone_at=tone_at, seconds=3.0)
    caller.wait(1.0).press("3")  # while it is played back: back to the spoken greeting
    caller.wait(5.0)

    owner = caller.call(relay, tmp_path, number.number)

    assert owner.finish(90) == 0, owner
    wait_until(
        lambda: not Number.objects.get(pk=number.pk).greeting_recording,
        deadline=30,
        what="the recorded greeting to be removed",
    )
    stored = Number.objects.get(pk=number.pk)
    assert stored.greeting_recording_seconds is None
    wait_until(lambda: not old.exists(), deadline=10, what="the old recording's file to go")
    assert greetings_stored(relay) == []  # the new recording was never kept


def test_a_closed_greeting_recorded_by_phone_is_what_callers_hear_while_closed(
    relay, tmp_path, number
):
    # Do not disturb: the number is closed now, and its callers hear its closed greeting.
    OpeningHours.objects.create(
        number=number, time_zone="UTC", do_not_disturb=True, closed_greeting="We are closed."
    )
    Number.objects.filter(pk=number.pk).update(greeting="Hi.")
    caller = Caller().wait_until(1.0).press("*1234#4")  # during the spoken closed greeting
    tone_at = (
        1.0
        + spoken_seconds(PIN_PROMPT, tmp_path)
        + PIN_CHECK_SECONDS
        + spoken_seconds(RECORDER["record"].format(what="closed greeting"), tmp_path)
        + BEEP_SECONDS
    )
    record_greeting(caller, tone_at=tone_at)
    caller.wait(1.0).press("1")  # while it is played back: keep it
    caller.wait(5.0)

    owner = caller.call(relay, tmp_path, number.number)

    assert owner.finish(90) == 0, owner
    hours = wait_until(
        lambda: (
            (found := OpeningHours.objects.get(number=number)).closed_greeting_recording and found
        ),
        deadline=30,
        what="the recorded closed greeting to be stored",
    )
    assert abs(hours.closed_greeting_recording_seconds - MESSAGE_SECONDS) <= 1
    assert Number.objects.get(pk=number.pk).greeting_recording == ""  # the usual one untouched
    [file] = greetings_stored(relay)
    assert file == relay.workdir / "recordings" / hours.closed_greeting_recording

    # The next caller, while the number is closed, hears the recording, not the text.
    listener = Listener()
    seconds = hours.closed_greeting_recording_seconds
    listening = Caller().wait(seconds + BEEP_SECONDS + 2.5)
    next_caller = listening.call(relay, tmp_path, number.number, sdp_port=listener.port)
    assert next_caller.finish(60) == 0, next_caller
    heard = listener.wav(tmp_path / "heard.wav")
    until_beep = sox_stat(heard, "reverse", "silence", "1", "0.02", "1%", "reverse")
    assert abs(until_beep["Length (seconds)"] - (seconds + BEEP_SECONDS)) <= 0.5
    assert correlation(wav_samples(heard), wav_samples(file)) > 0.9
