"""SIPp (harness/sip.py) as the far end of every SIP test, and Relay with
TELEPHONY_PROVIDER=sip pointed at it: the fixtures, and the helpers that tie them to a test's
database.

A test that needs SIPp, espeak-ng or sox skips naming what is missing; in CI (CI=true) it
fails instead, because .ci/run installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from calls.models import Call
from harness.live import RelayProcess, wait_until
from harness.ports import rtp_range
from harness.sip import Sipp, free_udp_port
from history.records import Record
from history.services import record_inbound_call
from realtime import services
from telephony.sip.rtp import wav_from_g711
from telephony.speech import Speech
from tests.records import records_where

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
    `relay.log` under `workdir`; `agent` is the agent's host:port for callers, `trunk_port`
    the port of the trunk a test starts (SIPp)."""
    trunk_port = free_udp_port()
    env = sip_env(workdir, trunk_port, INBOUND_RING_SECONDS=2, **extra)
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.workdir, process.agent, process.trunk_port = workdir, env["SIP_BIND"], trunk_port
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


def require_dnsmasq() -> None:
    """Skips the test off CI when dnsmasq is missing; in CI (.ci/run installs it) the test
    goes on, and fails."""
    if shutil.which("dnsmasq") is None and not os.environ.get("CI"):
        pytest.skip("needs dnsmasq (Debian: apt-get install dnsmasq)")
