"""What a real trunk asks of the agent: digest authentication, SIP over TCP, other voices."""

from __future__ import annotations

import os
import socket

import pytest

from calls.states import TERMINAL_STATES
from harness.live import AgentProcess, wait_until
from harness.ports import free_port, udp_port_taken
from harness.sip import Sipp, free_udp_port
from tests.telephony.conftest import sip_env, status_of, submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def place_one(
    user, tmp_path, *, sipp_args: dict, call: dict | None = None, before=None, **settings
):
    """One call through an agent of its own against SIPp; returns (call, SIPp's verdict).
    `before(agent_address)` runs once the agent is up, before the call is submitted."""
    trunk = free_port() if sipp_args.get("tcp") else free_udp_port()
    far_end = Sipp(tmp_path / "sipp", port=trunk, **sipp_args)
    env = sip_env(tmp_path, trunk, **settings)
    agent = AgentProcess(tmp_path, env)
    try:
        if before is not None:
            host, port = env["SIP_BIND"].rsplit(":", 1)
            wait_until(lambda: udp_port_taken(int(port)), deadline=30, what="the agent")
            before((host, int(port)))
        placed = submit(user, "trunk-call", **(call or {}))
        ended = lambda: status_of(placed) in TERMINAL_STATES  # noqa: E731
        wait_until(ended, deadline=30, what="the call to end")
        return placed, far_end.finish()
    finally:
        agent.stop()
        far_end.stop()


@pytest.mark.parametrize(("password", "ending"), [("s3cret", "completed"), ("wrong", "failed")])
def test_a_trunk_asking_for_digest_auth_gets_the_credentials(user, tmp_path, password, ending):
    call, verdict = place_one(
        user,
        tmp_path,
        sipp_args={"scenario": "auth", "username": "relay", "password": "s3cret"},
        SIP_USERNAME="relay",
        SIP_PASSWORD=password,
    )

    assert call.status == ending
    if ending == "failed":
        assert call.failure_reason == "403 Forbidden"
    assert verdict == 0
    assert password not in (tmp_path / "agent.log").read_text()  # no secret in any log


def test_a_call_over_tcp(user, tmp_path):
    call, verdict = place_one(
        user, tmp_path, sipp_args={"scenario": "uas", "tcp": True}, SIP_TRANSPORT="tcp"
    )

    assert call.status == "completed"
    assert verdict == 0


def test_the_message_is_spoken_in_the_language_asked_for(user, tmp_path):
    call, verdict = place_one(
        user,
        tmp_path,
        sipp_args={"scenario": "uas"},
        call={"message": "你好，包裹在门口。", "language": "cmn"},
    )

    assert (call.status, call.language) == ("completed", "cmn")
    assert call.duration >= 1
    assert verdict == 0


def test_a_call_is_hung_up_when_the_days_answered_seconds_run_out(user, tmp_path):
    """The plan grants 2 answered seconds a day; the message takes about ten to say. The
    agent sends its BYE at the grant, and the call ends completed, reason quota."""
    message = "This message takes far longer than two seconds to say, sentence by sentence. " * 2
    call, verdict = place_one(
        user,
        tmp_path,
        sipp_args={"scenario": "uas"},
        call={"message": message},
        PLAN_FREE_CALL_SECONDS_PER_DAY=2,
    )

    assert (call.status, call.failure_reason, call.talk_limit) == ("completed", "quota", 2)
    assert call.duration <= 2
    assert (call.ended_at - call.answered_at).total_seconds() < 5  # not the message's ten
    assert verdict == 0  # SIPp answered and got the agent's BYE


def exchange(address, data: bytes) -> bytes:
    """A request and its response, resent every 0.5 s as a UA would over UDP (a burst may
    have filled the agent's receive buffer)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.5)

        def answered() -> bytes | None:
            sock.sendto(data, address)
            try:
                return sock.recv(65536)
            except TimeoutError:
                return None

        return wait_until(answered, deadline=10, what="the agent's answer", interval=0)


def hostile_datagrams(address) -> None:
    """What a scanner or a broken peer sends to a SIP port, then two requests that must
    still be answered properly."""
    junk = [
        b"",
        b"\x00" * 1500,
        os.urandom(60000),
        b"INVITE sip:x SIP/2.0\r\n" + b"X: y\r\n" * 500 + b"\r\n",
        b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 1.2.3.4;branch=z9hG4bKnothing\r\n"
        b"Call-ID: none\r\nCSeq: 1 INVITE\r\n\r\n",
        "OPTIONS sip:\ud800 SIP/2.0\r\n\r\n".encode("utf-8", "surrogatepass"),
    ]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for data in junk * 20:
            sock.sendto(data, address)
    head = (
        "Via: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bKprobe\r\nFrom: <sip:probe@x>;tag=1\r\n"
        "To: <sip:relay@x>\r\nCall-ID: probe\r\n"
    )
    options = f"OPTIONS sip:relay@x SIP/2.0\r\n{head}CSeq: 1 OPTIONS\r\n\r\n".encode()
    assert exchange(address, options).startswith(b"SIP/2.0 200 OK")
    bye = f"BYE sip:relay@x SIP/2.0\r\n{head}CSeq: 2 BYE\r\n\r\n".encode()
    assert exchange(address, bye).startswith(b"SIP/2.0 481 ")


def test_garbage_on_the_sip_port_does_not_disturb_the_agent(user, tmp_path):
    call, verdict = place_one(
        user, tmp_path, sipp_args={"scenario": "uas"}, before=hostile_datagrams
    )

    assert call.status == "completed"
    assert verdict == 0


@pytest.mark.parametrize(
    ("password", "logged"),
    [
        ("s3cret", "registered with the trunk for 120 s"),
        ("wrong", "registration with the trunk failed: 403 Forbidden"),
    ],
)
def test_the_agent_registers_with_a_trunk_that_wants_it(tmp_path, password, logged):
    trunk = free_udp_port()
    far_end = Sipp(tmp_path / "sipp", "register", port=trunk, username="relay", password="s3cret")
    env = sip_env(tmp_path, trunk, SIP_REGISTER="true", SIP_USERNAME="relay", SIP_PASSWORD=password)
    agent = AgentProcess(tmp_path, env)
    try:
        assert far_end.finish() == 0
        wait_until(
            lambda: logged in agent.log_path.read_text(), deadline=10, what="the agent's log"
        )
    finally:
        agent.stop()
        far_end.stop()


def test_an_answered_call_is_hung_up_at_sip_max_call_seconds(user, tmp_path):
    long = " ".join(["This message would go on for far too long."] * 10)

    call, verdict = place_one(
        user,
        tmp_path,
        sipp_args={"scenario": "uas"},
        call={"message": long},
        SIP_MAX_CALL_SECONDS=1.5,
    )

    assert (call.status, call.failure_reason) == ("completed", "")
    assert call.duration == 2  # 1.5 s, rounded
    assert verdict == 0  # the BYE came from Relay
