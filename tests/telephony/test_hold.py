"""Hold and re-INVITEs over SIP (issue 58), on forwarded calls: SIPp is the caller (calling
the agent, harness/sipp/reinvite_caller.xml) and the target's phone
(harness/sipp/hold_target.xml), and each sends re-INVITEs inside its dialog: the target in a
call Relay placed, the caller in a call Relay answered. The caller sends no audio of its own;
its SDP names a socket of the test's (tests/telephony/rtp_recorder.Recorder), which
hears what Relay sends it: the target's audio relayed (SIPp's g711a.pcap, PCMA to PCMA, so
each packet's payload is one of the capture's), or Relay's music on hold (each payload a
20 ms frame of rtp.hold_music), or the number's own (issue 58: uploaded through the API, each
payload a frame of it in A-law as sox makes it).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness.live import RelayProcess, wait_until
from harness.sip import Sipp, free_udp_port
from harness.speech import sox_level
from telephony.sip.rtp import FRAME_SAMPLES, hold_music, wav_from_g711
from tests.factories import NumberFactory
from tests.telephony.conftest import call_in, sip_env, wait_for_records
from tests.telephony.holding import (
    AS_CALLER,
    AS_TARGET,
    PLAY,
    SPEECH,
    pause,
    reinvite,
    sdp_lines,
    upload_music,
)
from tests.telephony.rtp_recorder import Recorder
from virtual_numbers.models import Number
from voiceapps.services import voice_app_set
from voiceapps.verbs import script_check

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("calls_settled"),  # the agent's last writes before the flush
]

TARGET = "+441134960200"
PCMA = 8


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; SIPp on `relay.trunk_port` is the trunk a test starts."""
    workdir = tmp_path_factory.mktemp("hold")
    trunk_port = free_udp_port()
    env = sip_env(workdir, trunk_port, INBOUND_RING_SECONDS=2)
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.agent, process.trunk_port = env["SIP_BIND"], trunk_port
    process.workdir = workdir
    yield process
    process.stop()


@pytest.fixture
def recorder():
    listening = Recorder()
    yield listening
    listening.close()


MUSIC = {
    hold_music(PCMA)[start : start + FRAME_SAMPLES]
    for start in range(0, len(hold_music(PCMA)), FRAME_SAMPLES)
}


def heard(recorder: Recorder) -> str:
    """What the recorder heard, a letter a packet: m (the music), s (the target's audio),
    o (anything else)."""
    return "".join(
        "m" if payload in MUSIC else "s" if payload in SPEECH else "o"
        for _, _, payload in recorder.packets
    )


def final_responses(sipp: Sipp, cseq: int) -> list[str]:
    """The final responses SIPp received to its re-INVITE of CSeq `cseq`, as text."""
    blocks = re.split(r"\n-{20,}[^\n]*\n", sipp.messages.read_text())
    return [
        b
        for b in blocks
        if "message received" in b
        and re.search(r"^SIP/2.0 [2-6]\d\d", b, re.MULTILINE)
        and re.search(rf"^CSeq:\s*{cseq} INVITE", b, re.MULTILINE | re.IGNORECASE)
    ]


def final_response(sipp: Sipp, cseq: int) -> str:
    """The first of them."""
    return final_responses(sipp, cseq)[0]


def origin_version(response: str) -> int:
    return int(re.search(r"^o=\S+ \d+ (\d+) ", response, re.MULTILINE).group(1))


def forwarding(user):
    return NumberFactory(
        owner=user, greeting="Hi.", forward_targets=[TARGET], forward_ring_seconds=10
    )


def caller(relay, tmp_path, number, recorder, actions: str) -> Sipp:
    return call_in(
        relay.agent,
        tmp_path,
        "reinvite_caller",
        number.number,
        sdp_port=recorder.port,
        actions=actions,
    )


def target(relay, tmp_path, actions: str, sdp_port="[media_port]") -> Sipp:
    return Sipp(
        tmp_path / "target",
        "hold_target",
        port=relay.trunk_port,
        actions=actions,
        sdp_port=sdp_port,
    )


def level(packets, path: Path):
    """sox's measure of `packets`' audio (PCMA), as a WAV file."""
    path.write_bytes(wav_from_g711(b"".join(payload for _, _, payload in packets), PCMA))
    return sox_level(path)


def holding_target(relay, tmp_path) -> Sipp:
    """The target's phone: it talks, holds with a=sendonly after 2 s, resumes 3 s later and
    talks again."""
    return target(
        relay,
        tmp_path,
        PLAY
        + pause(2000)
        + reinvite(AS_TARGET, 1, sdp_lines(direction="sendonly"), expect="a=recvonly")
        + pause(3000)
        + reinvite(AS_TARGET, 2, sdp_lines(version=3), expect="a=sendrecv")
        + PLAY,
    )


def heard_with_own_music(recorder: Recorder, own_frames: set[bytes]) -> str:
    """What the caller heard, a letter a packet: n the number's own music, m Relay's, s the
    target's speech, o anything else."""
    return "".join(
        "n" if payload in own_frames else "m" if payload in MUSIC else "s" if payload in SPEECH
        else "o"
        for _, _, payload in recorder.packets
    )  # fmt: skip


def test_a_target_that_holds_has_the_caller_hear_the_music_until_it_resumes(
    relay, tmp_path, user, recorder
):
    number = forwarding(user)
    # The target talks (7 s of audio, which goes on while it holds), puts the call on hold
    # after 2 s (sendonly), resumes 3 s later (sendrecv) and talks again until the caller
    # hangs up, 8 s after the answer. (A SIPp pause is never cut short by a BYE: each side
    # waits for the other's BYE once its own steps are over.)
    phone = holding_target(relay, tmp_path)
    calling = caller(relay, tmp_path, number, recorder, pause(8000))
    assert calling.finish() == 0, calling
    assert phone.finish() == 0, phone

    # Relay answered each re-INVITE as the offer asked, its o= version one more each time
    # the answer changed (RFC 3264 §8).
    held, resumed = final_response(phone, 1), final_response(phone, 2)
    # Each 200 was sent once: its ACK, in a branch of its own, reached the re-INVITE's
    # transaction before its first resend (T1, 500 ms; the hold lasted 3 s).
    assert len(final_responses(phone, 1)) == 1, final_responses(phone, 1)
    assert "a=recvonly" in held and "a=sendrecv" in resumed, (held, resumed)
    assert origin_version(resumed) == origin_version(held) + 1
    # The caller heard the target, then only the music (the target's audio, which it went
    # on sending, was not passed on), then the target again.
    what = heard(recorder)
    assert re.fullmatch(r"o*s+m+s+o*", what), what
    music = [packet for packet, kind in zip(recorder.packets, what, strict=True) if kind == "m"]
    assert 2.0 <= len(music) * 0.02 <= 3.6, len(music)
    assert level(music, tmp_path / "music.wav").rms > 0.03
    [record] = wait_for_records(number, 1)
    assert record.forwarded_to == TARGET


def test_a_caller_that_holds_the_rfc_2543_way_has_the_target_hear_the_music(
    relay, tmp_path, user, recorder
):
    number = forwarding(user)
    # Neither end talks; the target's SDP names a second socket of the test's, which hears
    # what Relay sends the target. The caller holds with c=0.0.0.0 (RFC 2543) a second
    # after the answer, and resumes 3 s later.
    held_sdp = sdp_lines(address="0.0.0.0", port=recorder.port)  # noqa: S104 - RFC 2543's hold
    at_target = Recorder()
    try:
        phone = target(relay, tmp_path, "", sdp_port=at_target.port)
        calling = caller(
            relay,
            tmp_path,
            number,
            recorder,
            pause(1000)
            + reinvite(AS_CALLER, 2, held_sdp, expect="a=recvonly")
            + pause(3000)
            + reinvite(AS_CALLER, 3, sdp_lines(port=recorder.port, version=3), expect="a=sendrecv")
            + pause(1500),
        )
        assert calling.finish() == 0, calling
        assert phone.finish() == 0, phone
    finally:
        at_target.close()

    # The target heard the music for the 3 s of the hold, and nothing else: the music
    # stopped at the resume, 1.5 s before the caller hung up.
    what = heard(at_target)
    assert re.fullmatch(r"m+", what), what
    assert 2.0 <= len(what) * 0.02 <= 3.6, len(what)
    assert at_target.packets[-1][0] < time.time() - 1.0
    assert level(at_target.packets, tmp_path / "music.wav").rms > 0.03
    held, resumed = final_response(calling, 2), final_response(calling, 3)
    assert origin_version(resumed) == origin_version(held) + 1
    assert recorder.packets == []  # the caller, held or not, was sent nothing but silence


def sdp_of(message: str) -> str:
    return message[message.index("v=0") :].strip()


def test_a_re_invite_relay_cannot_take_gets_488_and_the_call_goes_on_as_it_was(
    relay, tmp_path, user, recorder
):
    number = forwarding(user)
    phone = target(relay, tmp_path, PLAY)
    # Once the target talks, the caller offers only G.729, then RTP/SAVP without a key (on a
    # call without SRTP): neither can be taken.
    calling = caller(
        relay,
        tmp_path,
        number,
        recorder,
        pause(1500)
        + reinvite(AS_CALLER, 2, sdp_lines(port=recorder.port, formats=(18,)), status=488)
        + reinvite(AS_CALLER, 3, sdp_lines(port=recorder.port, profile="RTP/SAVP"), status=488)
        + pause(3000),
    )
    wait_until(
        lambda: (
            calling.messages.exists()
            and calling.messages.read_text().count("SIP/2.0 488 Not Acceptable Here") >= 2
        ),
        deadline=30,
        what="the two 488s",
    )
    refused = time.time()
    assert calling.finish() == 0, calling
    assert phone.finish() == 0, phone
    # Each 488 was resent until its ACK, in the re-INVITE's branch, and no longer: SIPp
    # ACKs at once, so once.
    assert [len(final_responses(calling, cseq)) for cseq in (2, 3)] == [1, 1]

    # The caller went on hearing the target after the refusals, for the 3 s it stayed.
    after = [payload for at, _, payload in recorder.packets if at > refused + 0.5]
    assert sum(payload in SPEECH for payload in after) * 0.03 >= 2.0, heard(recorder)
    assert re.fullmatch(r"o*s+o*", heard(recorder)), heard(recorder)
    log = relay.log_path.read_text()
    assert "re-INVITE refused (488): no common codec" in log
    assert "re-INVITE refused (488): an RTP/SAVP offer on a call without SRTP" in log
    [record] = wait_for_records(number, 1)
    assert record.forwarded_to == TARGET


def test_a_re_invite_to_another_port_moves_what_relay_sends_there(relay, tmp_path, user, recorder):
    number = forwarding(user)
    second = Recorder()
    try:
        phone = target(relay, tmp_path, PLAY)
        calling = caller(
            relay,
            tmp_path,
            number,
            recorder,
            pause(1500)
            + reinvite(AS_CALLER, 2, sdp_lines(port=second.port), expect="a=sendrecv")
            + pause(2500),
        )
        assert calling.finish() == 0, calling
        assert phone.finish() == 0, phone
    finally:
        second.close()

    # The target's audio went to the first port until the re-INVITE, then to the second.
    first_heard, second_heard = heard(recorder), heard(second)
    assert re.fullmatch(r"o*s{30,}", first_heard), first_heard
    assert re.fullmatch(r"s{50,}o*", second_heard), second_heard
    assert recorder.packets[-1][0] <= second.packets[0][0] + 0.1
    # Relay's own stream did not change: its answer is its first one, version and all
    # (RFC 3264 §8: an SDP whose version does not increment is identical).
    assert sdp_of(final_response(calling, 2)) == sdp_of(final_response(calling, 1))


def test_a_number_s_own_music_is_what_the_held_caller_hears(
    relay, tmp_path, user, recorder, client_jwt, settings
):
    # The owner uploads a 440 Hz tone as the number's music; the agent plays it in A-law.
    number = forwarding(user)
    own_frames = upload_music(client_jwt, settings, number, relay.workdir, tmp_path / "tts", PCMA)
    assert not own_frames & MUSIC

    # The target talks, holds with a=sendonly after 2 s, resumes 3 s later and talks again.
    phone = holding_target(relay, tmp_path)
    calling = caller(relay, tmp_path, number, recorder, pause(8000))
    assert calling.finish() == 0, calling
    assert phone.finish() == 0, phone

    # The caller heard the target, then the number's music (over and over: it lasts 1 s,
    # the hold 3), never Relay's own, then the target again.
    what = heard_with_own_music(recorder, own_frames)
    assert re.fullmatch(r"o*s+n+o?s+o*", what), what
    music = [packet for packet, kind in zip(recorder.packets, what, strict=True) if kind == "n"]
    assert 2.0 <= len(music) * 0.02 <= 3.6, len(music)
    # sox hears the tone at its level: 0.24 of full scale at its peak, RMS about 0.17.
    measured = level(music, tmp_path / "own.wav")
    assert 0.14 < measured.rms < 0.2, measured
    [record] = wait_for_records(number, 1)
    assert record.forwarded_to == TARGET


def test_a_voice_app_s_dial_plays_the_number_s_own_music_to_the_held_caller(
    relay, tmp_path, user, recorder, client_jwt, settings
):
    # The number's voice application dials the target (answer on bridge); its music is the
    # number's own, as a forwarded call's is.
    number = forwarding(user)
    dial = {"targets": [TARGET], "timeout": 10, "callerId": "caller"}
    voice_app_set(number=number, script=script_check([{"dial": dial}]))
    own_frames = upload_music(client_jwt, settings, number, relay.workdir, tmp_path / "tts", PCMA)

    phone = holding_target(relay, tmp_path)
    calling = caller(relay, tmp_path, number, recorder, pause(8000))
    assert calling.finish() == 0, calling
    assert phone.finish() == 0, phone

    # The caller heard the target, then the number's music, never Relay's, then the target.
    what = heard_with_own_music(recorder, own_frames)
    assert re.fullmatch(r"o*s+n+o?s+o*", what), what
    assert 2.0 <= what.count("n") * 0.02 <= 3.6, what
    [record] = wait_for_records(number, 1)
    assert record.answered_by == "app"


def test_a_number_s_music_that_cannot_be_read_gives_way_to_relay_s_own(
    relay, tmp_path, user, recorder
):
    # The number names a file the storage no longer has (removed by hand, a storage lost).
    number = forwarding(user)
    Number.objects.filter(pk=number.pk).update(
        hold_music="hold-music/gone.wav", hold_music_seconds=1.0
    )
    phone = target(
        relay,
        tmp_path,
        PLAY
        + pause(1500)
        + reinvite(AS_TARGET, 1, sdp_lines(direction="sendonly"), expect="a=recvonly")
        + pause(2500)
        + reinvite(AS_TARGET, 2, sdp_lines(version=3), expect="a=sendrecv")
        + PLAY,
    )
    calling = caller(relay, tmp_path, number, recorder, pause(6500))
    assert calling.finish() == 0, calling
    assert phone.finish() == 0, phone

    # The held caller heard Relay's own music, never silence, and the agent said why.
    what = heard(recorder)
    assert re.fullmatch(r"o*s+m+s+o*", what), what
    assert what.count("m") * 0.02 >= 2.0, what
    assert "a number's music on hold could not be played; Relay's own plays" in (
        relay.log_path.read_text()
    )
    wait_for_records(number, 1)
