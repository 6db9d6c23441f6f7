"""RFC 4475's 49 torture messages (tests/telephony/torture/), each answered as the RFC says:
by the parser and the request checks alone, then on the wire by a running agent."""

from __future__ import annotations

import re
import secrets
import socket
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.live import AgentProcess, wait_until
from harness.ports import free_port, tcp_listening, udp_port_taken
from harness.sip import free_udp_port
from telephony.sip.checks import (
    Refusal,
    check_request,
    refusal_response,
    response_acceptable,
)
from telephony.sip.message import (
    SipParseError,
    params,
    parse,
    response_to,
    stream_content_length,
)
from telephony.sip.ua import ALLOW
from tests.telephony.conftest import sip_env

TORTURE = Path(__file__).parent / "torture"
VALID = "valid"  # parses, passes every check, and goes on to the agent
DROP = "drop"  # never answered

# What the parser and the checks decide for each message: a status, DROP or VALID. The RFC's
# section and, where the RFC leaves a choice, which one was taken.
VERDICTS = {
    # 3.1.1 Valid messages
    "wsinv": VALID,  # 3.1.1.1 whitespace, folding, escapes everywhere
    "intmeth": 501,  # 3.1.1.2 an unknown method made of every token character
    "esc01": VALID,  # 3.1.1.3 % escapes in URIs
    "escnull": 405,  # 3.1.1.4 escaped NULs; a REGISTER, which a UA does not take
    "esc02": 501,  # 3.1.1.5 RE%47IST%45R is not REGISTER: an unknown method
    "lwsdisp": VALID,  # 3.1.1.6 no LWS between display name and <
    "longreq": VALID,  # 3.1.1.7 long values, 34 Vias
    "dblreq": 405,  # 3.1.1.8 a REGISTER; the INVITE after its body is noise (RFC 3261 §18.3)
    "semiuri": VALID,  # 3.1.1.9 ; in the user part of the Request-URI
    "transports": VALID,  # 3.1.1.10 unknown transports in Via
    "mpart01": 405,  # 3.1.1.11 a MESSAGE with a binary multipart body
    "unreason": VALID,  # 3.1.1.12 a response: UTF-8 reason phrase
    "noreason": VALID,  # 3.1.1.13 a response: empty reason phrase
    # 3.1.2 Invalid messages
    "badinv01": 400,  # 3.1.2.1 empty Via and Contact parameters
    "clerr": 400,  # 3.1.2.2 Content-Length past the datagram's end (RFC 3261 §18.3)
    "ncl": 400,  # 3.1.2.3 negative Content-Length
    "scalar02": 400,  # 3.1.2.4 CSeq not below 2**31
    "scalarlg": DROP,  # 3.1.2.5 a response with overlarge CSeq: discarded
    "quotbal": 400,  # 3.1.2.6 unterminated quoted string
    "ltgtruri": 400,  # 3.1.2.7 Request-URI in <>
    "lwsruri": 400,  # 3.1.2.8 whitespace in the Request-URI
    "lwsstart": 400,  # 3.1.2.9 two SPs in the request line (may be rejected: it is)
    "trws": 400,  # 3.1.2.10 SP after SIP/2.0 (may be rejected: it is)
    "escruri": 400,  # 3.1.2.11 headers in the Request-URI (may be rejected: it is)
    "baddate": 400,  # 3.1.2.12 Date not in GMT (may be rejected: it is)
    "regbadct": 400,  # 3.1.2.13 Contact URI with ? and no <>
    "badaspec": 400,  # 3.1.2.14 spaces inside <>
    "baddn": 400,  # 3.1.2.15 unquoted display name with a comma
    "badvers": 505,  # 3.1.2.16 SIP/7.0
    "mismatch01": 400,  # 3.1.2.17 OPTIONS with CSeq INVITE
    "mismatch02": 501,  # 3.1.2.18 unknown method, CSeq INVITE: 501 preferred over 400
    "bigcode": DROP,  # 3.1.2.19 a response with status 4294967301: discarded
    # 3.2 Transaction layer
    "badbranch": VALID,  # 3.2.1 branch=z9hG4bK alone: RFC 2543 matching falls back
    # 3.3 Application layer
    "insuf": DROP,  # 3.3.1 no Call-ID, From or To: nothing to build a response from
    "unkscm": 416,  # 3.3.2 unknown Request-URI scheme
    "novelsc": 416,  # 3.3.3 soap.beep: a scheme this UA never takes
    "unksm2": 405,  # 3.3.4 odd schemes in To, From, Contact: valid; a REGISTER
    "bext01": 420,  # 3.3.5 Require with unknown options (Proxy-Require is a proxy's)
    "invut": 415,  # 3.3.6 an INVITE body of unknown type
    "regaut01": 405,  # 3.3.7 unknown Authorization scheme: valid; a REGISTER
    "multi01": 400,  # 3.3.8 two each of CSeq, Call-ID, To, From
    "mcl01": 400,  # 3.3.9 two Content-Lengths
    "bcast": DROP,  # 3.3.10 a response with two Vias: a UAC discards it (RFC 3261 §8.1.3.3)
    "zeromf": VALID,  # 3.3.11 Max-Forwards: 0 at its target
    "cparam01": 405,  # 3.3.12 a REGISTER
    "cparam02": 405,  # 3.3.13 a REGISTER
    "regescrt": 405,  # 3.3.14 a REGISTER
    "sdp01": 406,  # 3.3.15 an INVITE whose Accept leaves out application/sdp
    # 3.4 Backward compatibility
    "inv2543": VALID,  # 3.4.1 RFC 2543 INVITE: no branch, From tag, Max-Forwards or length
}

# What the agent itself answers to the valid ones (None: a response, never answered).
DISPATCHED = {
    "wsinv": 481,  # its To tag names a dialog the agent does not hold
    "esc01": 404,  # not a number the agent serves
    "lwsdisp": 200,
    "longreq": 404,
    "semiuri": 200,
    "transports": 200,
    "unreason": None,
    "noreason": None,
    "badbranch": 200,
    "zeromf": 200,
    "inv2543": 404,
}


def torture(name: str) -> bytes:
    return (TORTURE / f"{name}.dat").read_bytes()


def on_the_wire(name: str) -> int | None:
    verdict = VERDICTS[name]
    if verdict == VALID:
        return DISPATCHED[name]
    return None if verdict == DROP else verdict


def test_every_message_of_rfc_4475_is_here_and_has_a_verdict():
    assert sorted(p.stem for p in TORTURE.glob("*.dat")) == sorted(VERDICTS)
    assert len(VERDICTS) == 49
    assert {n for n, v in VERDICTS.items() if v == VALID} == set(DISPATCHED)


# --- the parser and the checks ---------------------------------------------------------------
def verdict_of(data: bytes):
    try:
        message = parse(data)
    except SipParseError:
        return DROP
    if not message.is_request:
        return VALID if response_acceptable(message) else DROP
    refusal = check_request(message, allow=ALLOW)
    if refusal is None:
        return VALID
    return refusal.status or DROP


@pytest.mark.parametrize("name", VERDICTS)
def test_each_torture_message_gets_the_verdict_the_rfc_gives_it(name):
    assert verdict_of(torture(name)) == VERDICTS[name]


@pytest.mark.parametrize("name", VERDICTS)
def test_a_refusal_is_a_response_that_parses_with_one_of_each_header(name):
    try:
        request = parse(torture(name))
    except SipParseError:
        return
    if not request.is_request or not (refusal := check_request(request, allow=ALLOW)):
        return
    response = parse(refusal_response(request, refusal).encode())

    assert (response.status, response.cseq) == (refusal.status, request.cseq)
    assert response.get_all("Via") == request.get_all("Via")
    for header in ("From", "To", "Call-ID", "CSeq"):
        assert len([k for k, _ in response.headers if k == header]) == 1
    assert params(response.get("To") or "").get("tag")


def test_a_short_tortuous_invite_reads_as_it_was_meant():
    invite = parse(torture("wsinv"))

    assert invite.uri == "sip:vivekg@chair-dnrc.example.com;unknownparam"
    assert invite.cseq == (9, "INVITE")
    assert params(invite.get("To"))["tag"] == "1918181833n"  # written `tag    = 1918181833n`
    assert params(invite.get("From"))["tag"] == "98asjd8"
    assert invite.get("Max-Forwards") == "0068"
    assert invite.branch == "390skdjuw"
    assert [params(via)["branch"] for via in invite.get_all("Via")] == [
        "390skdjuw",
        "z9hG4bK9ikj8",
        "z9hG4bK30239",
    ]
    assert invite.get("NewFangledHeader") == "newfangled value continued newfangled value"
    assert len(invite.body) == 150


def test_a_tag_written_with_spaces_is_not_added_twice():
    response = response_to(parse(torture("wsinv")), 481, "Gone", to_tag="mine")

    assert params(response.get("To"))["tag"] == "1918181833n"
    assert "mine" not in response.get("To")


def test_the_octets_after_a_datagrams_message_are_noise():
    register = parse(torture("dblreq"))

    assert (register.method, register.body) == ("REGISTER", b"")


def test_two_of_each_header_are_answered_with_the_first_of_each():
    request = parse(torture("multi01"))
    response = refusal_response(request, check_request(request, allow=ALLOW))

    assert response.status == 400
    assert response.sip_call_id == "multi01.98asdh@192.0.2.1"
    assert response.cseq == (5, "INVITE")


def test_the_refusals_carry_the_headers_the_rfc_asks_for():
    def refusal(name: str) -> Refusal:
        return check_request(parse(torture(name)), allow=ALLOW)

    assert refusal("bext01").headers == (
        ("Unsupported", "nothingSupportsThis, nothingSupportsThisEither"),
    )
    assert refusal("intmeth").headers == (("Allow", ALLOW),)
    assert refusal("escnull").headers == (("Allow", ALLOW),)
    assert refusal("invut").headers == (("Accept", "application/sdp"),)


OPTIONS = (
    "{method} {uri} SIP/2.0\r\n"
    "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKorder\r\n"
    "From: <sip:a@example.com>;tag=1\r\n"
    "To: <sip:b@example.com>\r\n"
    "Call-ID: order@example.com\r\n"
    "CSeq: 1 {method}\r\n"
    "{extra}"
    "Content-Length: 0\r\n\r\n"
)


@pytest.mark.parametrize(
    ("method", "uri", "extra", "status"),
    [
        # §8.2: the method first (405/501), then the Request-URI (416), then Require (420).
        ("FOO", "mailto:b@example.com", "Require: x\r\n", 501),
        ("SUBSCRIBE", "mailto:b@example.com", "Require: x\r\n", 405),
        ("OPTIONS", "mailto:b@example.com", "Require: x\r\n", 416),
        ("OPTIONS", "sip:b@example.com", "Require: x\r\n", 420),
        ("OPTIONS", "tel:+442079460123", "", None),
        # A CANCEL is not refused for a Require it should not carry (§9.1).
        ("CANCEL", "sip:b@example.com", "Require: x\r\n", None),
        # §8.2.3, for the INVITE's body: encodings and Accept.
        ("INVITE", "sip:b@example.com", "Accept: application/*, text/plain\r\n", None),
        ("INVITE", "sip:b@example.com", "Accept: text/plain\r\n", 406),
    ],
)
def test_the_checks_come_in_the_order_of_rfc_3261_section_8_2(method, uri, extra, status):
    request = parse(OPTIONS.format(method=method, uri=uri, extra=extra).encode())

    refusal = check_request(request, allow=ALLOW)

    assert (refusal.status if refusal else None) == status


def test_an_ack_is_never_answered_even_when_malformed():
    ack = OPTIONS.format(method="ACK", uri="sip:b@example.com", extra="CSeq: 2 ACK\r\n")

    assert check_request(parse(ack.encode()), allow=ALLOW).status == 0
    assert check_request(parse(ack.replace("CSeq: 2 ACK\r\n", "").encode()), allow=ALLOW) is None


@pytest.mark.parametrize(
    ("head", "length"),
    [
        (b"INVITE sip:a@b SIP/2.0\r\nl: 12", 12),
        (b"INVITE sip:a@b SIP/2.0\r\nContent-Length  :  7\r\nX: y", 7),
        (b"INVITE sip:a@b SIP/2.0\r\nX: y", 0),
        (b"INVITE sip:a@b SIP/2.0\r\nContent-Length: -999", None),
        (b"INVITE sip:a@b SIP/2.0\r\nContent-Length: 13\r\nContent-Length: 5", None),
        (b"INVITE sip:a@b SIP/2.0\r\nContent-Length: ten", None),
    ],
)
def test_a_stream_is_framed_by_one_readable_content_length(head, length):
    if length is None:
        with pytest.raises(SipParseError):
            stream_content_length(head)
    else:
        assert stream_content_length(head) == length


HEAD = (
    b"Via: SIP/2.0/UDP h;branch=z9hG4bKx\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:b@c>\r\n"
    b"Call-ID: x\r\nCSeq: 1 OPTIONS\r\n"
)


@pytest.mark.timeout(10)  # a regular expression that backtracks would take hours
@pytest.mark.parametrize(
    "data",
    [
        b"OPTIONS " + b" " * 60000 + b"x\r\n" + HEAD,
        b"OPTIONS " + b"x " * 30000 + b"SIP/2.\r\n" + HEAD,
        b"OPTIONS sip:a@b SIP/2.0\r\n" + HEAD + b"Via: SIP/2.0/UDP " + b"a" * 60000 + b" !",
        b"OPTIONS sip:a@b SIP/2.0\r\n" + HEAD + b"Via: SIP" + b" / a" * 15000,
        b"OPTIONS sip:a@b SIP/2.0\r\n" + HEAD + b"Contact: <sip:b@c>" + b";a=b c" * 10000,
        b"OPTIONS sip:a@b SIP/2.0\r\n" + HEAD + b'Contact: "' + b"\\" * 60000,
        b"OPTIONS sip:a@b SIP/2.0\r\n" + HEAD + b"Contact: " + b"a " * 30000 + b"<x",
        b"OPTIONS sip:a@b SIP/2.0\r\n" + HEAD + b"Require: " + b"a;," * 20000,
    ],
)
def test_a_datagram_built_to_make_the_parser_backtrack_is_read_in_linear_time(data):
    try:
        message = parse(data[:65000] + b"\r\n\r\n")
    except SipParseError:
        return
    check_request(message, allow=ALLOW)


def test_a_response_is_not_dropped_for_a_date_no_user_agent_reads():
    response = torture("noreason").replace(b"Content-Length: 0", b"Date: today\r\nl: 0")

    assert parse(response).defects == ["a Date not in GMT"]
    assert response_acceptable(parse(response))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(VERDICTS)),
    st.integers(min_value=0, max_value=4000),
    st.binary(min_size=0, max_size=8),
)
def test_a_mangled_torture_message_is_refused_or_passed_never_a_crash(name, at, junk):
    data = torture(name)
    at %= len(data) + 1
    try:
        message = parse(data[:at] + junk + data[at + len(junk) :])
    except SipParseError:
        return
    if message.is_request:
        refusal = check_request(message, allow=ALLOW)
        if refusal is not None and refusal.status:
            parse(refusal_response(message, refusal).encode())
    else:
        response_acceptable(message)


# --- on the wire ------------------------------------------------------------------------------
def options(call_id: str) -> bytes:
    return (
        "OPTIONS sip:relay@127.0.0.1 SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK{call_id}\r\n"
        "Max-Forwards: 70\r\n"
        "From: <sip:probe@127.0.0.1>;tag=1\r\n"
        "To: <sip:relay@127.0.0.1>\r\n"
        f"Call-ID: {call_id}\r\n"
        "CSeq: 1 OPTIONS\r\n"
        "Content-Length: 0\r\n\r\n"
    ).encode()


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def call_id_of(response: bytes) -> str:
    found = re.search(rb"^(?:Call-ID|i)[ \t]*:[ \t]*(.*?)\r?$", response, re.M | re.I)
    return found.group(1).decode(errors="replace") if found else ""


def finals_for(address, data: bytes, *, expect_one: bool) -> list[bytes]:
    """Send `data` from a socket of its own, then an OPTIONS of ours; the final responses
    that came back for `data`. The agent answers datagrams in the order they arrive, so once
    our OPTIONS is answered a message it refused would have been answered too; only an
    answer the agent computes (a number looked up) may come later, and `expect_one` waits
    for it."""
    probe = f"probe-{secrets.token_hex(6)}"
    finals: list[bytes] = []
    probed = False
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.sendto(data, address)
        sock.sendto(options(probe), address)
        deadline = time.monotonic() + 10
        while not (probed and (finals or not expect_one)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            try:
                packet = sock.recv(65536)
            except TimeoutError:
                break
            if call_id_of(packet) == probe:
                assert status_of(packet) == 200, packet
                probed = True
            elif status_of(packet) >= 200:
                finals.append(packet)
    assert probed, "the agent stopped answering"
    return finals


@pytest.fixture(scope="module")
def agent(tmp_path_factory, django_db_setup):
    """One telephony agent on UDP, alone (no runrelay): (host, port)."""
    workdir = tmp_path_factory.mktemp("torture")
    env = sip_env(workdir, free_udp_port())
    process = AgentProcess(workdir, env)
    host, port = env["SIP_BIND"].rsplit(":", 1)
    try:
        wait_until(lambda: udp_port_taken(int(port)), deadline=30, what="the agent")
        yield host, int(port)
    finally:
        process.stop()


def test_the_agent_answers_every_torture_message_over_udp_as_the_rfc_says(agent):
    answered = {}
    for name in VERDICTS:
        expected = on_the_wire(name)
        finals = finals_for(agent, torture(name), expect_one=expected is not None)
        answered[name] = [status_of(final) for final in finals]

    assert answered == {name: [s] if (s := on_the_wire(name)) else [] for name in VERDICTS}
    # And it still answers a plain OPTIONS.
    assert finals_for(agent, options("after"), expect_one=True)[0].startswith(b"SIP/2.0 200 ")


def read_finals(conn: socket.socket, count: int) -> dict[str, int]:
    """The next `count` final responses on a TCP connection, by Call-ID."""
    buffer, finals = b"", {}
    while len(finals) < count:
        chunk = conn.recv(65536)
        assert chunk, f"the connection closed after {finals}"
        buffer += chunk
        *responses, buffer = buffer.split(b"\r\n\r\n")  # the agent's answers have no body
        for response in responses:
            if status_of(response) >= 200:
                finals[call_id_of(response)] = status_of(response)
    return finals


def test_over_tcp_a_framing_error_closes_the_connection_and_a_short_body_is_waited_for(
    tmp_path, django_db_setup
):
    port = free_port()
    env = sip_env(tmp_path, free_port(), SIP_TRANSPORT="tcp", SIP_BIND=f"127.0.0.1:{port}")
    process = AgentProcess(tmp_path, env)
    try:
        wait_until(lambda: tcp_listening(port), deadline=30, what="the agent on TCP")
        # RFC 4475 3.1.2.3 and 3.3.9: nothing tells where the message ends, so the
        # connection is closed.
        for name in ("ncl", "mcl01"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(torture(name))
                assert conn.recv(65536) == b"", name
        # 3.1.2.2 over a stream: the rest of the body is still to come, and the INVITE is
        # taken once it has (were it refused early, its 400 would be read here). Messages
        # after it on the same connection are framed and answered in turn.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            data = torture("clerr")
            body = data.partition(b"\r\n\r\n")[2]
            rest = b"a=x\r\n" * ((9999 - len(body)) // 5)
            assert len(body) + len(rest) == 9999
            conn.sendall(data + rest + torture("lwsdisp") + torture("mismatch01"))
            assert read_finals(conn, 3) == {
                "clerr.0ha0isndaksdjweiafasdk3": 404,
                "lwsdisp.1234abcd@funky.example.com": 200,
                "mismatch01.dj0234sxdfl3": 400,
            }
    finally:
        process.stop()
