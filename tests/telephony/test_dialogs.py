"""Dialogs as RFC 3261 has them behind proxies, and media from callers behind NAT: SIPp plays
the record-routing proxy (and the NATed caller), and the agent's answers are read off the wire.
"""

from __future__ import annotations

import socket
import time

import pytest

from calls.states import TERMINAL_STATES
from harness.live import AgentProcess, wait_until
from harness.ports import udp_port_taken
from harness.sip import MESSAGE_SECONDS, Sipp, free_udp_port
from history.records import Record
from telephony.inbound.voicemail import DEFAULT_GREETING
from telephony.speech import Speech
from tests.factories import NumberFactory
from tests.records import records_count
from tests.telephony.conftest import sip_env, status_of, submit, wait_for_records
from tests.telephony.test_inbound import BEEP_SECONDS, CALLER

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

NAT_ADDRESS = "127.0.0.2"  # loopback, but not where SIPp sends from: no packet leaves the host


def start_agent(tmp_path, **settings) -> tuple[AgentProcess, tuple[str, int]]:
    env = sip_env(tmp_path, free_udp_port(), INBOUND_RING_SECONDS=1, **settings)
    agent = AgentProcess(tmp_path, env)
    host, port = env["SIP_BIND"].rsplit(":", 1)
    wait_until(lambda: udp_port_taken(int(port)), deadline=30, what="the agent")
    return agent, (host, int(port))


def greeting_ms(tmp_path) -> int:
    seconds = len(Speech(tmp_path / "tts").render(DEFAULT_GREETING, "en")[8]) / 8000
    return int((seconds + BEEP_SECONDS + 0.3) * 1000)


def call_routed_from_behind_nat(tmp_path, agent_address, number) -> Sipp:
    return Sipp(
        tmp_path / "sipp",
        "inbound_routed",
        port=free_udp_port(),
        remote="{}:{}".format(*agent_address),
        service=number.number,
        caller=CALLER,
        sdp_ip=NAT_ADDRESS,
        greeting_ms=greeting_ms(tmp_path),
        bye_timeout_ms=40000,
    )


def message_from_behind_nat(user, tmp_path, **settings) -> Record:
    """The record of a call that SIPp makes through its two proxies from behind NAT,
    leaving a message; SIPp's own checks of Relay's answers must all pass."""
    number = NumberFactory(owner=user)
    agent, address = start_agent(tmp_path, VOICEMAIL_SILENCE_SECONDS=2, **settings)
    try:
        caller = call_routed_from_behind_nat(tmp_path, address, number)
        assert caller.finish(60) == 0, caller
        [record] = wait_for_records(number, 1)
    finally:
        agent.stop()
    return record


def test_an_answered_call_through_proxies_keeps_their_route_both_ways(user, tmp_path):
    """Relay's 180 and 200 copy the INVITE's Record-Route, and its BYE goes to the first
    route with the route set in Route (SIPp checks each); the caller's SDP names an address
    its RTP does not come from, and the message is recorded all the same (latching)."""
    record = message_from_behind_nat(user, tmp_path)

    assert record.status == "answered"
    assert record.recording, "nothing recorded: the caller's RTP was not latched onto"
    assert abs(record.recording_seconds - MESSAGE_SECONDS) <= 1


def test_with_latching_off_media_from_elsewhere_is_not_heard(user, tmp_path):
    record = message_from_behind_nat(user, tmp_path, SIP_MEDIA_LATCHING="false")

    assert (record.status, record.recording) == ("answered", "")


def test_an_outbound_call_follows_the_callees_route_set(user, tmp_path):
    """The 200's Record-Route, reversed, is the route set: SIPp checks that the ACK and the
    BYE name the callee's Contact, carry both routes nearest first, and reach it."""
    trunk = free_udp_port()
    far_end = Sipp(tmp_path / "sipp", "answer_routed", port=trunk)
    agent = AgentProcess(tmp_path, sip_env(tmp_path, trunk))
    try:
        placed = submit(user, "routed", message="Routed.")
        wait_until(
            lambda: status_of(placed) in TERMINAL_STATES, deadline=30, what="the call to end"
        )
        verdict = far_end.finish()
    finally:
        agent.stop()
        far_end.stop()

    assert placed.status == "completed"
    assert verdict == 0, far_end


# --- timer G, on a socket of the test's own -----------------------------------------------------
def invite(number: str, port: int, branch: str, sdp: str = "") -> bytes:
    body = (
        f"Content-Type: application/sdp\r\nContent-Length: {len(sdp)}\r\n\r\n{sdp}"
        if sdp
        else "Content-Length: 0\r\n\r\n"
    )
    return (
        f"INVITE sip:{number}@127.0.0.1 SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:{port};branch={branch}\r\n"
        f"From: <sip:{CALLER}@127.0.0.1>;tag=t1\r\n"
        f"To: <sip:{number}@127.0.0.1>\r\n"
        f"Call-ID: {branch}@127.0.0.1\r\n"
        "CSeq: 1 INVITE\r\n"
        f"Contact: <sip:caller@127.0.0.1:{port}>\r\n"
        "Max-Forwards: 70\r\n" + body
    ).encode()


def final_responses(sock: socket.socket, seconds: float) -> list[bytes]:
    """Every final response that arrives within `seconds`."""
    found, end = [], time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        if not data.startswith(b"SIP/2.0 100"):
            found.append(data)
    return found


def test_a_refusal_over_udp_is_resent_until_its_ack_comes(user, tmp_path):
    """RFC 3261 §17.2.1: a 404 is resent at T1, 2*T1... (timer G) while no ACK comes, and no
    more once it has."""
    agent, address = start_agent(tmp_path)
    branch = f"z9hG4bK{time.monotonic_ns()}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        try:
            sock.sendto(invite("+442079469999", port, branch), address)
            # T1 = 0.5 s: sent at 0, then at 0.5, 1.5 and 3.5 s.
            unacked = final_responses(sock, 2.5)
            to = next(
                line for line in unacked[0].decode().split("\r\n") if line.lower().startswith("to:")
            )
            ack = (
                f"ACK sip:+442079469999@127.0.0.1 SIP/2.0\r\n"
                f"Via: SIP/2.0/UDP 127.0.0.1:{port};branch={branch}\r\n"
                f"From: <sip:{CALLER}@127.0.0.1>;tag=t1\r\n{to}\r\n"
                f"Call-ID: {branch}@127.0.0.1\r\nCSeq: 1 ACK\r\nMax-Forwards: 70\r\n"
                "Content-Length: 0\r\n\r\n"
            ).encode()
            sock.sendto(ack, address)
            after_ack = final_responses(sock, 4.5)
        finally:
            agent.stop()

    assert len(unacked) >= 3, unacked
    assert all(r.startswith(b"SIP/2.0 404 ") for r in unacked)
    assert len({r for r in unacked}) == 1  # the same response, not new ones
    assert after_ack == []


def test_an_offer_relay_cannot_answer_is_refused_before_it_rings(user, tmp_path):
    """G.729 only: 488 at once, no 180, and nothing recorded (nobody heard of the call)."""
    number = NumberFactory(owner=user)
    agent, address = start_agent(tmp_path)
    offer = (
        "v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        "m=audio 4000 RTP/AVP 18\r\na=rtpmap:18 G729/8000\r\n"
    )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        try:
            sock.sendto(
                invite(number.number, port, f"z9hG4bK{time.monotonic_ns()}", offer), address
            )
            answers = final_responses(sock, 1.0)
        finally:
            agent.stop()

    assert answers and all(a.startswith(b"SIP/2.0 488 ") for a in answers), answers
    assert not records_count(number=number) > 0
