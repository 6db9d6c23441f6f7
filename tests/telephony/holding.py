"""What the tests of hold share (issue 58): SIPp's re-INVITEs inside a dialog (the SDP of an
offer, the steps of a re-INVITE as the caller, reinvite_caller.xml, or the target's phone,
hold_target.xml, sends it), SIPp's own audio (g711a.pcap, whose payloads a test tells from
the music's), and a number's own music uploaded as its owner does."""

from __future__ import annotations

import struct
from pathlib import Path

from harness.sip import SIPP_SHARE
from telephony.sip.rtp import FRAME_SAMPLES
from telephony.speech import Speech
from tests.factories import music_wav

# SIPp's recorded speech (PCMA), played from the scenario's media port.
PLAY = f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/g711a.pcap"/></action></nop>\n'


def capture_payloads(path: Path) -> set[bytes]:
    """The RTP payloads of a capture (Ethernet, IPv4 and UDP frames, as SIPp's)."""
    data, offset, payloads = path.read_bytes(), 24, set()
    while offset < len(data):
        captured = struct.unpack("<I", data[offset + 8 : offset + 12])[0]
        payloads.add(data[offset + 16 + 42 + 12 : offset + 16 + captured])
        offset += 16 + captured
    return payloads


SPEECH = capture_payloads(SIPP_SHARE / "g711a.pcap")


def sdp_lines(*, port="[media_port]", address="[media_ip]", version=2, formats=(8, 101),
              direction="sendrecv", profile="RTP/AVP") -> str:  # fmt: skip
    names = {0: "PCMU/8000", 8: "PCMA/8000", 18: "G729/8000", 101: "telephone-event/8000"}
    return "\n".join(
        [
            "v=0",
            f"o=sipp 1 {version} IN IP4 [local_ip]",
            "s=-",
            f"c=IN IP4 {address}",
            "t=0 0",
            f"m=audio {port} {profile} {' '.join(map(str, formats))}",
            *(f"a=rtpmap:{pt} {names[pt]}" for pt in formats),
            f"a={direction}",
        ]
    )


# The lines of a request in the dialog: as the caller (From its own, To Relay's with its tag)
# and as the target (From its To with its tag, To Relay's From, as hold_target.xml kept them).
AS_CALLER = (
    "sip:relay@[remote_ip]:[remote_port]",
    "From: <sip:[caller]@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]\n"
    "To: [$relay_to]\n"
    "Contact: <sip:sipp@[local_ip]:[local_port]>",
)
AS_TARGET = (
    "[$relay_contact]",
    "From: [$callee];tag=[pid]SIPpTag01[call_number]\n"
    "To: [$relay_from]\n"
    "Contact: <sip:[local_ip]:[local_port];transport=[transport]>",
)


def reinvite(as_who, cseq: int, body: str, *, status: int = 200, expect: str = "") -> str:
    """SIPp actions: a re-INVITE with `body` (CSeq `cseq`, in the dialog as `as_who`), its
    response `status` (its SDP matching `expect`, when given), and the ACK (RFC 3261
    §13.2.2.4 for a 2xx, in a branch of its own; §17.1.1.3 for a refusal, in the INVITE's)."""
    uri, lines = as_who
    branch = f"z9hG4bK-reinvite-[pid]-{cseq}"
    check = (
        f'<action><ereg regexp="{expect}" search_in="body" check_it="true" '
        f'assign_to="answer{cseq}"/></action>'
        if expect
        else ""
    )
    ack_branch = branch if status >= 300 else f"{branch}-ack"
    return f"""  <send retrans="500">
    <![CDATA[
INVITE {uri} SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch={branch}
{lines}
Call-ID: [call_id]
CSeq: {cseq} INVITE
Max-Forwards: 70
Content-Type: application/sdp
Content-Length: [len]

{body}

    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="{status}">{check}</recv>
  <send>
    <![CDATA[
ACK {uri} SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch={ack_branch}
{lines}
Call-ID: [call_id]
CSeq: {cseq} ACK
Max-Forwards: 70
Content-Length: 0

    ]]>
  </send>
{f'  <Reference variables="answer{cseq}"/>' if expect else ""}
"""


def pause(ms: int) -> str:
    return f'  <pause milliseconds="{ms}"/>\n'


def frames_of(audio: bytes) -> set[bytes]:
    """`audio`'s 20 ms frames, as they are sent one a packet."""
    return {audio[i : i + FRAME_SAMPLES] for i in range(0, len(audio), FRAME_SAMPLES)}


def upload_music(client, settings, number, var_dir: Path, tts_dir: Path, law: int) -> set[bytes]:
    """The owner (`client`) uploads a 440 Hz tone of 1 s (22.05 kHz, stereo) as `number`'s
    music on hold, through the API, into the recordings storage of the Relay whose var
    directory is `var_dir` (what every host shares); the frames of G.711 `law` a held party
    hears of it (the stored file converted by sox, as the agent converts it)."""
    recordings = {
        **settings.STORAGES["recordings"],
        "OPTIONS": {"location": str(var_dir / "recordings")},
    }
    settings.STORAGES = {**settings.STORAGES, "recordings": recordings}
    response = client.put(
        f"/api/numbers/{number.pk}/hold-music", data=music_wav(1.0), content_type="audio/wav"
    )
    assert response.status_code == 200, response.content
    number.refresh_from_db()
    stored = (var_dir / "recordings" / number.hold_music).read_bytes()
    return frames_of(Speech(tts_dir).telephone_audio(stored, law))
