"""Hold from a real phone (issue 58): baresip, the owner's phone behind Kamailio, answers a
forwarded call, puts it on hold with its own re-INVITE (`/hold`: a=sendonly) and resumes it
(`/resume`), each through the carrier edge by the dialog's route set. The caller is SIPp
calling the agent (harness/sipp/reinvite_caller.xml), its SDP naming a socket of the test's
(tests/telephony/test_answering_machines.Recorder), which hears what Relay sends it: the
phone's tone, then Relay's music on hold (each payload a 20 ms frame of rtp.hold_music),
then the phone's tone again. Over UDP."""

from __future__ import annotations

import re
import struct
import subprocess
import time

import pytest

from calls.models import Leg
from harness.kamailio import CALLEE
from harness.live import tool, wait_until
from harness.speech import sox_level
from telephony.sip.rtp import FRAME_SAMPLES, hold_music, pcm_from_g711, wav_from_g711
from tests.factories import NumberFactory
from tests.telephony.conftest import call_in, wait_for_records
from tests.telephony.interop.conftest import CALLER
from tests.telephony.test_answering_machines import Recorder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

PCMA = 8
MUSIC = {
    hold_music(PCMA)[start : start + FRAME_SAMPLES]
    for start in range(0, len(hold_music(PCMA)), FRAME_SAMPLES)
}


def tone(path, seconds: int = 40):
    """A steady 600 Hz tone at half scale, as baresip's aufile reads it (8 kHz, mono, 16-bit):
    the owner's phone's voice."""
    subprocess.run(  # noqa: S603 - a fixed command on our own file
        [tool("sox"), "-n", "-r", "8000", "-c", "1", "-b", "16", str(path), "synth", str(seconds),
         "sine", "600", "vol", "0.5"],
        check=True,
        timeout=30,
    )  # fmt: skip
    return path


def peak(payload: bytes) -> int:
    pcm = pcm_from_g711(payload, PCMA)
    return max(abs(sample) for sample in struct.unpack(f"<{len(pcm) // 2}h", pcm))


def heard(recorder: Recorder) -> str:
    """What the caller heard, a letter a packet: m (the music), t (the phone's tone, or any
    other sound), o (silence)."""
    return "".join(
        "m" if payload in MUSIC else "t" if peak(payload) > 500 else "o"
        for _, _, payload in recorder.packets
    )


@pytest.mark.parametrize("transport", ["udp"], indirect=True)
def test_the_owners_phone_holds_and_resumes_and_the_caller_hears_the_music_between(
    relay, kamailio, phones, user, tmp_path, transport
):
    number = NumberFactory(owner=user, alias="Shop", forward_targets=[CALLEE])
    owner = phones("callee", number=CALLEE, source=tone(tmp_path / "tone.wav"), answer=True)
    recorder = Recorder()
    try:
        caller = call_in(
            relay.agent,
            tmp_path,
            "reinvite_caller",
            number.number,
            caller=CALLER,
            sdp_port=recorder.port,
            actions='  <pause milliseconds="11000"/>\n',
        )
        owner.wait_event("CALL_ESTABLISHED", deadline=20)
        wait_until(lambda: heard(recorder).count("t") >= 50, deadline=15, what="1 s of tone")

        owner.command("hold")
        wait_until(lambda: heard(recorder).count("m") >= 50, deadline=10, what="1 s of music")
        held = time.time()
        wait_until(lambda: time.time() > held + 2, deadline=5, what="2 s more on hold")
        owner.command("resume")
        wait_until(
            lambda: re.search(r"m+[ot]*t{50,}", heard(recorder)),
            deadline=10,
            what="1 s of the phone again",
        )
        assert caller.finish() == 0, caller
        owner.wait_event("CALL_CLOSED", deadline=10)  # Relay hung the phone up after the caller
    finally:
        recorder.close()

    # The caller heard the phone, then the music alone (the tone baresip went on sending
    # while it held was not passed on), then the phone again.
    what = heard(recorder)
    assert re.fullmatch(r"[ot]*t{50,}o{0,10}m{100,}o{0,10}t{50,}[ot]*", what), what
    music = [packet for packet, kind in zip(recorder.packets, what, strict=True) if kind == "m"]
    assert 2.0 <= len(music) * 0.02 <= 6.0, len(music)
    path = tmp_path / "music.wav"
    path.write_bytes(wav_from_g711(b"".join(payload for _, _, payload in music), PCMA))
    assert sox_level(path).rms > 0.03
    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to) == ("answered", CALLEE)
    # baresip's hold and resume were re-INVITEs of its own, routed through the edge by the
    # dialog's route set (Record-Route kept), to the agent.
    [leg_id] = Leg.objects.filter(call_id=record.pk).values_list("sip_call_id", flat=True)
    assert len(kamailio.routed(leg_id, "INVITE", sender=CALLEE)) == 2, kamailio.trace
