"""SIPp, the far end of the SIP tests and of the bench's SIP scenarios: a UAS that answers
(its own `uas`, or a scenario of harness/sipp/), or callers calling Relay's agent; and the RTP
captures it plays (Debian's sip-tester ships g711a.pcap and one capture per DTMF key).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
from pathlib import Path

from harness.live import ChildProcess
from harness.ports import free_port, tcp_listening, udp_port_taken

SCENARIOS = Path(__file__).resolve().parent / "sipp"
SIPP_SHARE = Path("/usr/share/sip-tester")  # sip-tester's captures: g711a.pcap, the DTMF keys


def free_udp_port(width: int = 1) -> int:
    """A UDP port on 127.0.0.1, with the `width - 1` ports above it, free now and handed out
    to no other test (harness/ports.py's bands)."""
    return free_port(width)


class Sipp(ChildProcess):
    """SIPp on 127.0.0.1:`port` running `scenario` ("uas" for the built-in one, else a file
    of harness/sipp/ or any file given as a Path, with @name@ markers filled from `fill`), for
    `calls` calls and at most `timeout` seconds. As a UAS by default; given `remote`
    (host:port) it calls there, as `caller` (its `[caller]`), dialling `service`, at most
    `limit` calls at once. Every message it sees is written to its message log. Given `host`
    (a sandbox host, harness/netns.py), it runs there, on that host's address; `extra` are more
    of SIPp's options (a rate of its own: `("-r", "50", "-rp", "60000")`)."""

    stop_grace = 5

    def __init__(
        self,
        workdir: Path,
        scenario: str | Path,
        *,
        port: int,
        calls=1,
        echo=False,
        tcp=False,
        timeout=60,
        remote: str | None = None,
        service: str = "",
        caller: str = "",
        limit: int = 0,
        host=None,
        extra: tuple[str, ...] = (),
        **fill,
    ):
        workdir.mkdir(parents=True, exist_ok=True)
        self.messages = workdir / "sipp-messages.log"
        self.errors = workdir / "sipp-errors.log"
        self.media_port = free_udp_port(width=4)  # audio RTP and RTCP, and video's two above
        if scenario == "uas":
            which = ["-sn", "uas"]
        else:
            source = scenario if isinstance(scenario, Path) else SCENARIOS / f"{scenario}.xml"
            text = source.read_text()
            fill.setdefault("pcap", SIPP_SHARE / "g711a.pcap")
            for name, value in fill.items():
                text = text.replace(f"@{name}@", str(value))
            path = workdir / source.name
            path.write_text(text)
            which = ["-sf", str(path)]
        argv = [
            "sipp",
            *which,
            "-i",
            host.address if host else "127.0.0.1",
            "-p",
            str(port),
            "-mp",
            str(self.media_port),
            "-m",
            str(calls),
            "-timeout",
            f"{timeout}s",
            "-nostdin",
            "-trace_msg",
            "-message_file",
            str(self.messages),
            "-trace_err",
            "-error_file",
            str(self.errors),
            *(["-rtp_echo"] if echo else []),
            *(["-t", "t1"] if tcp else []),
            *(["-s", service] if service else []),
            *(["-key", "caller", caller] if caller else []),
            *(["-l", str(limit), "-r", str(limit)] if limit else []),
            *extra,
            *([remote] if remote else []),
        ]
        if host is not None:  # a sandbox host's (harness/netns.py)
            argv = host.command(argv)
            listening = host.tcp_listening if tcp else host.udp_listening
        else:
            listening = tcp_listening if tcp else udp_port_taken
        super().__init__(argv, dict(os.environ), log=workdir / "sipp.out")
        self.wait_started(lambda: listening(port), deadline=10, what=f"SIPp to listen on {port}")

    def finish(self, timeout: float = 30) -> int:
        """SIPp's exit status once it has seen its calls through (0: all of them succeeded)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"SIPp did not finish in {timeout} s") from None
        self.stop()  # it has exited: this closes its log
        return code

    def __repr__(self) -> str:
        # What a failed assertion about SIPp shows: its errors and the end of its messages.
        def tail(path: Path, size: int) -> str:
            return path.read_text(errors="replace")[-size:] if path.exists() else "(none)"

        return (
            f"<SIPp; errors: {tail(self.errors, 2000)}\nlast messages: {tail(self.messages, 3000)}>"
        )

    def received(self, method: str) -> list[str]:
        """Every `method` request SIPp received, as text, in order."""
        if not self.messages.exists():
            return []
        blocks = re.split(r"\n-{20,}[^\n]*\n", self.messages.read_text())
        return [b for b in blocks if "message received" in b and f"\n{method} sip:" in b]

    def invites(self) -> list[str]:
        """The Call-ID of every INVITE SIPp received (a retransmission counted once)."""
        call_ids = []
        for block in self.received("INVITE"):
            found = re.search(r"^Call-ID:\s*(\S+)", block, re.MULTILINE | re.IGNORECASE)
            if found and found.group(1) not in call_ids:
                call_ids.append(found.group(1))
        return call_ids


def pcap_timestamps(path: Path) -> tuple[list[int], int]:
    """The RTP timestamps of an RTP capture's packets, and the last packet's payload size."""
    data = path.read_bytes()
    offset, stamps, last_payload = 24, [], 0
    while offset < len(data):
        captured = struct.unpack("<I", data[offset + 8 : offset + 12])[0]
        rtp = data[offset + 16 + 42 : offset + 16 + captured]  # Ethernet, IPv4, UDP
        stamps.append(struct.unpack("!I", rtp[4:8])[0])
        last_payload = len(rtp) - 12
        offset += 16 + captured
    return stamps, last_payload


def pcap_from_alaw(alaw: bytes, path: Path) -> Path:
    """Write G.711 A-law audio as an RTP capture SIPp's play_pcap_audio plays: 20 ms packets
    (payload type 8) in Ethernet, IPv4 and UDP frames, a libpcap file like SIPp's own."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    ssrc, packet = 0x52454C59, 160
    for index, start in enumerate(range(0, len(alaw), packet)):
        payload = alaw[start : start + packet]
        rtp = struct.pack("!BBHII", 0x80, 8, index & 0xFFFF, start, ssrc) + payload
        udp = struct.pack("!HHHH", 10000, 20000, 8 + len(rtp), 0) + rtp
        ip = (
            struct.pack(
                "!BBHHHBBH4s4s",
                0x45,
                0,
                20 + len(udp),
                index & 0xFFFF,
                0,
                64,
                17,
                0,
                bytes([127, 0, 0, 1]),
                bytes([127, 0, 0, 1]),
            )
            + udp
        )
        frame = b"\x00" * 12 + b"\x08\x00" + ip
        seconds, micros = divmod(index * 20_000, 1_000_000)
        out += struct.pack("<IIII", seconds, micros, len(frame), len(frame)) + frame
    path.write_bytes(bytes(out))
    return path


def pcap_seconds(path: Path) -> float:
    """How long an RTP capture plays: the span of its RTP timestamps plus one packet."""
    stamps, last_payload = pcap_timestamps(path)
    return (max(stamps) - min(stamps) + last_payload) / 8000


def pcap_packets_within(path: Path, seconds: float) -> int:
    """How many of the capture's packets play in its first `seconds`."""
    stamps, _ = pcap_timestamps(path)
    return sum(1 for stamp in stamps if stamp - min(stamps) < seconds * 8000)


MESSAGE_SECONDS = pcap_seconds(SIPP_SHARE / "g711a.pcap")


def presses(keys: str, *, after_ms: int = 0) -> str:
    """SIPp actions: wait `after_ms`, then press `keys` as RFC 4733 events (SIPp's own
    captures of each key), a quarter second apart; nothing after the last, so that a BYE
    may come at once."""
    names = {"*": "star", "#": "pound"}
    wait = f'  <pause milliseconds="{after_ms}"/>\n' if after_ms else ""
    return wait + '\n  <pause milliseconds="250"/>\n'.join(
        f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/dtmf_2833_{names.get(k, k)}.pcap"/>'
        "</action></nop>"
        for k in keys
    )


def touch(path: Path, *, after_ms: int) -> str:
    """SIPp actions: wait `after_ms`, then create `path`: the test's sign that SIPp has got
    this far in its scenario (and that the audio it started before has been sent)."""
    return (
        f'  <pause milliseconds="{after_ms}"/>\n'
        f'  <nop><action><exec command="touch {path}"/></action></nop>\n'
    )


def _in_dialog(method: str, cseq: int, headers: str = "") -> str:
    """A SIPp `send` of `method` in the dialog of a phone in harness/sipp/transfer_phones.xml
    (the UAS that answered Relay's INVITE), with `headers` (lines) before its empty body."""
    return f"""  <send retrans="500">
    <![CDATA[
{method} [$relay_contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
Max-Forwards: 70
From:[$invite_to];tag=[pid]SIPpTag01[call_number]
To:[$relay_from]
Call-ID: [call_id]
CSeq: {cseq} {method}
Contact: <sip:[local_ip]:[local_port];transport=[transport]>
{headers}Content-Length: 0

    ]]>
  </send>
"""


def refer(refer_to: str, *, expect: int, cseq: int = 1, after_ms: int = 0) -> str:
    """SIPp steps of a phone in harness/sipp/transfer_phones.xml (a UAS that answered Relay's
    INVITE): wait `after_ms`, send REFER (RFC 3515) in the dialog with `refer_to` as its
    Refer-To value, and receive its final response `expect` (202, or a refusal)."""
    wait = f'  <pause milliseconds="{after_ms}"/>\n' if after_ms else ""
    headers = f"Refer-To: {refer_to}\nReferred-By: <sip:[local_ip]:[local_port]>\n"
    return wait + _in_dialog("REFER", cseq, headers) + f'  <recv response="{expect}"/>\n'


def hang_up(*, after_ms: int, cseq: int = 20) -> str:
    """SIPp steps of a party in harness/sipp/transfer_phones.xml (a UAS that answered Relay's
    INVITE): wait `after_ms`, send its own BYE in the dialog, take the 200, and end the call
    there (no BYE from Relay follows)."""
    return (
        f'  <pause milliseconds="{after_ms}"/>\n'
        + _in_dialog("BYE", cseq)
        + '  <recv response="200" next="end"/>\n'
    )


def notified(*statuses: str) -> str:
    """SIPp steps of that phone: receive a NOTIFY (`Event: refer`, a message/sipfrag body)
    for each of `statuses` in order ("100 Trying", "200 OK"...), checking its body, and answer
    each 200."""
    steps = []
    for status in statuses:
        steps.append(
            f"""  <recv request="NOTIFY">
    <action>
      <ereg regexp="^SIP/2\\.0 {status}" search_in="body" check_it="true"
            assign_to="frag"/>
      <ereg regexp="refer" search_in="hdr" header="Event:" check_it="true" assign_to="event"/>
    </action>
  </recv>
  <send>
    <![CDATA[
SIP/2.0 200 OK
[last_Via:]
[last_From:]
[last_To:]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

    ]]>
  </send>
"""
        )
    return "".join(steps)
