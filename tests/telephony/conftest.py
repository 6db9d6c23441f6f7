"""SIPp as the far end of every SIP test, and Relay with TELEPHONY_PROVIDER=sip pointed at it.

A test that needs SIPp, espeak-ng or sox skips naming what is missing; in CI (CI=true) it
fails instead, because .ci/run installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from calls.models import Call
from harness.live import ChildProcess, RelayProcess, relay_env, wait_until
from harness.ports import free_port, rtp_range, tcp_listening, udp_port_taken
from history.records import Record
from history.services import record_inbound_call
from realtime import services
from telephony.sip.rtp import wav_from_g711
from telephony.speech import Speech
from tests.records import records_where

SCENARIOS = Path(__file__).parent / "scenarios"
TOOLS = ("sipp", "espeak-ng", "sox")


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def pytest_collection_modifyitems(config, items):
    missing = missing_tools()
    if not missing or os.environ.get("CI"):
        return  # in CI a missing tool fails the tests that need it
    reason = f"needs {', '.join(missing)} (Debian: apt-get install sip-tester espeak-ng sox)"
    here = str(Path(__file__).parent)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=reason))


def free_udp_port(width: int = 1) -> int:
    """A UDP port on 127.0.0.1, with the `width - 1` ports above it, free now and handed out
    to no other test (harness/ports.py's bands)."""
    return free_port(width)


def free_udp_and_tcp_port() -> int:
    """A port free on 127.0.0.1 for both UDP and TCP, for a server that binds both (dnsmasq:
    a port free only for UDP once stopped it at start with "Address already in use")."""
    return free_port()


class AgentProcess(ChildProcess):
    """`manage.py telephony_agent` alone (no runrelay), so that a test can kill it."""

    stop_grace = 10

    def __init__(self, workdir: Path, env: dict, *, index: int = 0, name: str = "agent"):
        argv = [sys.executable, "manage.py", "telephony_agent", "--index", str(index)]
        super().__init__(argv, relay_env(workdir, **env), log=workdir / f"{name}.log")


class Sipp(ChildProcess):
    """SIPp on 127.0.0.1:`port` running `scenario` ("uas" for the built-in one, else a file
    of scenarios/ or any file given as a Path, with @name@ markers filled from `fill`), for
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

        def started() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"SIPp exited at start-up{self._log_tail()}")
            return listening(port)

        wait_until(started, deadline=10, what=f"SIPp to listen on {port}")

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


SIPP_SHARE = Path("/usr/share/sip-tester")


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


def bridge_log(log: str, call_id: str) -> re.Match | None:
    """The agent's log line of a forwarded call's bridge (telephony.inbound.forwarding): its
    groups are the seconds bridged, the caller's codec and the target's, and the packets
    relayed to the target and to the caller."""
    return re.search(
        rf"inbound call {re.escape(call_id)}: bridged (\d+) s \(caller (\w+), target (\w+)\); "
        r"relayed (\d+) packets to the target, (\d+) to the caller",
        log,
    )


CALLER = "+447700900123"  # the caller of the inbound tests, unless one says otherwise


def call_in(
    agent: str,
    workdir: Path,
    scenario: str,
    dialled: str,
    *,
    caller: str = CALLER,
    host=None,
    **fill,
) -> Sipp:
    """SIPp calling `dialled` through the agent at `agent` (host:port) as `caller`, running
    `scenario`, in a directory of its own under `workdir` (on sandbox host `host`, if given)."""
    return Sipp(
        workdir / f"sipp-{scenario}-{time.monotonic_ns()}",
        scenario,
        port=free_udp_port(),
        remote=agent,
        service=dialled,
        caller=caller,
        host=host,
        **fill,
    )


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


def sip_env(workdir: Path, trunk_port: int, **extra) -> dict:
    """Settings of a Relay whose SIP trunk is SIPp on `trunk_port`."""
    env = {
        "TELEPHONY_PROVIDER": "sip",
        "SIP_TRUNK_URI": f"sip:127.0.0.1:{trunk_port}",
        "SIP_BIND": f"127.0.0.1:{free_udp_port()}",
        "RTP_PORT_RANGE": rtp_range(),
        "RTC_PORT_RANGE": rtp_range(40),  # the browsers' legs, off the other tests' ports
        # Short, so that no-answer tests are quick; long enough that a far end starved of
        # CPU on a busy CI machine still answers within it.
        "SIP_RING_TIMEOUT": "5",
        "TTS_CACHE_DIR": str(workdir / "tts"),
    }
    env.update({key: str(value) for key, value in extra.items()})
    return env


@pytest.fixture(scope="module")
def sip_relay(tmp_path_factory, django_db_setup):
    """runrelay with TELEPHONY_PROVIDER=sip (one agent, ring timeout 5 s), its output in
    `relay.log`; its trunk is whatever SIPp a test starts on `relay.trunk_port`."""
    workdir = tmp_path_factory.mktemp("sip-relay")
    trunk_port = free_udp_port()
    relay = RelayProcess(workdir, log=workdir / "relay.log", **sip_env(workdir, trunk_port))
    relay.trunk_port, relay.workdir = trunk_port, workdir
    yield relay
    relay.stop()


def agent_relay(workdir: Path, **extra) -> RelayProcess:
    """runrelay with the SIP agent (sip_env, calls ringing INBOUND_RING_SECONDS=2), its log in
    `relay.log`; `agent` is the agent's host:port for callers, `trunk_port` the port of the
    trunk a test starts (SIPp)."""
    trunk_port = free_udp_port()
    env = sip_env(workdir, trunk_port, INBOUND_RING_SECONDS=2, **extra)
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.agent, process.trunk_port = env["SIP_BIND"], trunk_port
    return process


@pytest.fixture
def sipp(sip_relay, tmp_path):
    """Start SIPp as `sip_relay`'s trunk: `sipp("uas", echo=True)`, `sipp("reject",
    status=486, phrase="Busy Here")`; stopped at teardown if still running."""
    started = []

    def start(scenario: str, **kwargs) -> Sipp:
        process = Sipp(
            tmp_path / f"sipp{len(started)}", scenario, port=sip_relay.trunk_port, **kwargs
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.stop()


@pytest.fixture
def calls_settled(transactional_db):
    """After the test, wait (20 s at most) until the live agent has recorded every call it
    took: a caller's SIPp ends with its BYE, and the agent writes the call's record a moment
    later. Were the test's database emptied meanwhile (transaction=True's flush, a TRUNCATE
    on PostgreSQL), the two would deadlock."""
    yield
    from calls.models import Call
    from calls.states import ACTIVE_STATES

    deadline = time.monotonic() + 20
    up = Call.objects.filter(direction="inbound", status__in=ACTIVE_STATES)
    while up.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def app(settings):
    """A real voice application on loopback (tests/voiceapps/conftest.py), which this process
    may name in scripts (the agents under test are started allowing loopback too)."""
    from tests.voiceapps.conftest import VoiceApp

    settings.WEBHOOK_ALLOW_PRIVATE = True
    server = VoiceApp()
    yield server
    server.close()


def submit(user, call_id: str, message: str = "Hello from Relay.", **extra) -> Call:
    """A call submitted through the service, committed (the tests run with transaction=True);
    with `script=`, a call that runs it instead of saying `message`."""
    data = {"callId": call_id, "to": "+442079460123", "message": message, **extra}
    if "script" in extra:
        del data["message"]
    return services.call_submit(user=user, data=data)[0]


def stored_message(relay, number, tmp_path, text: str) -> tuple[Record, float]:
    """A voicemail message `text` on `number`, stored where the relay keeps recordings."""
    audio = Speech(tmp_path / "tts").render(text, "en")[8]
    storage = FileSystemStorage(location=relay.workdir / "recordings")
    name = storage.save("message.wav", ContentFile(wav_from_g711(audio, 8)))
    seconds = len(audio) / 8000
    record = record_inbound_call(
        number=number,
        caller_num="+447700900999",
        status="answered",
        duration=9,
        recording=name,
        recording_seconds=seconds,
    )
    return record, seconds


def records_of(number) -> list[Record]:
    """The history records of `number`, oldest first."""
    return records_where(number=number)


def wait_for_records(number, count: int, deadline: float = 30) -> list[Record]:
    return wait_until(
        lambda: (found := records_of(number)) and len(found) >= count and found,
        deadline=deadline,
        what=f"{count} record(s) of {number.number}",
    )


def status_of(call: Call) -> str:
    call.refresh_from_db()
    return call.status


class Dnsmasq(ChildProcess):
    """dnsmasq (Debian `dnsmasq`) on 127.0.0.1:`port`, the authority for `domain` from
    `records` (its options: "--srv-host=...", "--naptr-record=...", "--host-record=...").
    Any other name under `domain` is NXDOMAIN; names outside it are refused. Its queries are
    logged to dnsmasq.log in `workdir`."""

    stop_grace = 5

    def __init__(self, workdir: Path, records: list[str], *, domain: str = "relay.test"):
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_udp_and_tcp_port()
        argv = [
            "dnsmasq",
            "--keep-in-foreground",
            "--conf-file=/dev/null",  # nothing of the machine's own configuration
            "--no-resolv",
            "--no-hosts",
            "--pid-file=",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            f"--port={self.port}",
            f"--local=/{domain}/",
            "--local-ttl=60",
            "--log-facility=-",
            "--log-queries",
            *records,
        ]
        super().__init__(argv, dict(os.environ), log=workdir / "dnsmasq.log")
        wait_until(lambda: udp_port_taken(self.port), deadline=10, what="dnsmasq to listen")

    @property
    def address(self) -> str:
        """As SIP_DNS_SERVERS names it."""
        return f"127.0.0.1:{self.port}"


def require_dnsmasq() -> None:
    """Skips the test off CI when dnsmasq is missing; in CI (.ci/run installs it) the test
    goes on, and fails."""
    if shutil.which("dnsmasq") is None and not os.environ.get("CI"):
        pytest.skip("needs dnsmasq (Debian: apt-get install dnsmasq)")
