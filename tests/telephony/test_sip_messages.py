"""The SIP user agent's own parts: what it accepts off the wire, and what it answers."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telephony.sip import auth, sdp
from telephony.sip.dialog import Dialog
from telephony.sip.message import Message, SipParseError, params, parse, response_to, uri_of
from telephony.sip.rtp import LATCH_SECONDS, Latch, RtpStream
from telephony.sip.transaction import Timers
from telephony.sip.transport import RECEIVE_BUFFER_BYTES, UdpTransport
from telephony.sip.ua import UaConfig, UserAgent, mark_received

INVITE = (
    b"INVITE sip:+442079460123@trunk.example.com SIP/2.0\r\n"
    b"Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bKabc;rport\r\n"
    b"v: SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bKdef\r\n"
    b'f: "Relay" <sip:+442079460001@trunk.example.com>;tag=1234\r\n'
    b"t: <sip:+442079460123@trunk.example.com>\r\n"
    b"i: abc@10.0.0.1\r\n"
    b"CSeq: 7 INVITE\r\n"
    b"l: 4\r\n"
    b"\r\n"
    b"v=0\r\nextra bytes past Content-Length"
)


def test_a_request_parses_with_compact_headers_and_a_bounded_body():
    message = parse(INVITE)

    assert (message.method, message.uri) == ("INVITE", "sip:+442079460123@trunk.example.com")
    assert message.sip_call_id == "abc@10.0.0.1"
    assert message.cseq == (7, "INVITE")
    assert message.branch == "z9hG4bKabc"
    assert len(message.get_all("Via")) == 2
    assert params(message.get("From"))["tag"] == "1234"
    assert uri_of(message.get("From")) == "sip:+442079460001@trunk.example.com"
    assert message.body == b"v=0\r"


def test_a_response_copies_the_transaction_headers_and_adds_our_tag():
    response = response_to(parse(INVITE), 486, "Busy Here", to_tag="xyz")
    again = parse(response.encode())

    assert (again.status, again.reason) == (486, "Busy Here")
    assert again.get_all("Via") == parse(INVITE).get_all("Via")
    assert params(again.get("To"))["tag"] == "xyz"
    assert again.get("Content-Length") == "0"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\r\n\r\n",
        b"HELLO\r\n\r\n",
        b"SIP/2.0 99 Too Low\r\nVia: x\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\n\r\n",
        b"INVITE sip:a@b SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\n\r\n",  # no Via
        b"INVITE sip:a@b SIP/2.0\r\nVia: x\r\nCall-ID: a\r\nCSeq: 1\r\nl: -1\r\n\r\n",
        b"INVITE sip:a@b SIP/2.0\r\n\xff\xfe: x\r\n\r\n",
        b"INVITE sip:a@b SIP/2.0\r\n" + b"X: y\r\n" * 200 + b"\r\n",
        b"INVITE sip:a@b SIP/2.0\r\nVia: " + b"x" * 70000 + b"\r\n\r\n",
    ],
)
def test_malformed_messages_are_refused_as_such(data):
    with pytest.raises(SipParseError):
        parse(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_nothing_off_the_wire_breaks_the_parser(data):
    try:
        message = parse(data)
    except SipParseError:
        return
    assert isinstance(message, Message)


def test_digest_answers_rfc_2617s_worked_example():
    challenge = (
        'Digest realm="testrealm@host.com", qop="auth,auth-int", '
        'nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"'
    )

    value = auth.authorization(
        challenge=challenge,
        method="GET",
        uri="/dir/index.html",
        username="Mufasa",
        password="Circle Of Life",
        cnonce="0a4f113b",
    )

    assert 'response="6629fae49393a05397450978507c4ef1"' in value
    assert 'opaque="5ccc069c403ebaf9f0171e9517f40e41"' in value
    assert "nc=00000001" in value


def test_digest_declines_what_it_cannot_answer():
    kwargs = {"method": "INVITE", "uri": "sip:a@b", "username": "u", "password": "p"}
    assert auth.authorization(challenge='Basic realm="x"', **kwargs) is None
    assert (
        auth.authorization(challenge='Digest realm="x", nonce="n", algorithm=SHA-256', **kwargs)
        is None
    )
    assert (
        auth.authorization(challenge='Digest realm="x", nonce="n", qop="auth-int"', **kwargs)
        is None
    )


def test_the_answer_picks_the_first_offered_codec_the_far_end_kept():
    answer = (
        b"v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\n"
        b"m=audio 40000 RTP/AVP 8 101\r\na=rtpmap:8 PCMA/8000\r\n"
        b"a=rtpmap:101 telephone-event/8000\r\n"
    )

    media = sdp.parse_answer(answer)

    assert (media.host, media.port, media.payload_type, media.telephone_event) == (
        "192.0.2.1",
        40000,
        8,
        101,
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"v=0\r\nc=IN IP4 1.2.3.4\r\n",
        b"v=0\r\nc=IN IP4 1.2.3.4\r\nm=audio 4000 RTP/AVP 18\r\n",
    ],
)
def test_an_unusable_answer_is_an_sdp_error(body):
    with pytest.raises(sdp.SdpError):
        sdp.parse_answer(body)


# --- dialogs (RFC 3261 §12) and symmetric RTP ----------------------------------------------------
class _Ua:
    """What a dialog asks of its user agent, and no more."""

    default_port = 5060
    host = "192.0.2.2"

    @staticmethod
    def accepts_source(host: str) -> bool:
        return True

    class config:  # noqa: N801 - stands in for UaConfig
        user_agent = "Relay"

    @staticmethod
    def via(branch: str) -> str:
        return f"SIP/2.0/UDP 127.0.0.1:5060;branch={branch}"


def _dialog(route_set):
    return Dialog(
        _Ua(),
        sip_call_id="c@x",
        local_header="<sip:relay@a.example>;tag=ours",
        remote_header="<sip:bob@b.example>;tag=theirs",
        remote_target="sip:bob@198.51.100.5:5070",
        route_set=route_set,
    )


def test_a_request_through_loose_routers_targets_the_peer_and_carries_the_route_set():
    dialog = _dialog(["<sip:p1.example;lr>", "<sip:p2.example;lr>"])
    bye = dialog.request("BYE")

    assert bye.uri == "sip:bob@198.51.100.5:5070"
    assert bye.get("Route") == "<sip:p1.example;lr>, <sip:p2.example;lr>"
    assert (bye.get("To"), bye.cseq) == ("<sip:bob@b.example>;tag=theirs", (1, "BYE"))
    assert dialog.next_hop() == ("p1.example", 5060)
    assert dialog.request("BYE").cseq == (2, "BYE")  # the local CSeq goes up by one


def test_a_request_through_a_strict_router_puts_it_in_the_request_uri():
    dialog = _dialog(["<sip:strict.example:5080>", "<sip:p2.example;lr>"])
    bye = dialog.request("BYE")

    assert bye.uri == "sip:strict.example:5080"
    assert bye.get("Route") == "<sip:p2.example;lr>, <sip:bob@198.51.100.5:5070>"
    assert dialog.next_hop() == ("strict.example", 5080)


def test_without_a_route_set_a_request_goes_to_the_remote_target():
    dialog = _dialog([])

    assert dialog.request("BYE").get("Route") is None
    assert dialog.next_hop() == ("198.51.100.5", 5070)


@pytest.mark.parametrize(
    ("via", "source", "marked"),
    [
        # RFC 3581: rport asked for gets the source port, and received is always added.
        (
            "SIP/2.0/UDP 10.0.0.7:5060;branch=z9hG4bKa;rport",
            ("203.0.113.9", 40123),
            "SIP/2.0/UDP 10.0.0.7:5060;branch=z9hG4bKa;rport=40123;received=203.0.113.9",
        ),
        # RFC 3261 §18.2.1: a sent-by host that is not the source gets received.
        (
            "SIP/2.0/UDP 10.0.0.7:5060;branch=z9hG4bKa",
            ("203.0.113.9", 5060),
            "SIP/2.0/UDP 10.0.0.7:5060;branch=z9hG4bKa;received=203.0.113.9",
        ),
        # The same host: nothing to add.
        (
            "SIP/2.0/UDP 203.0.113.9:5060;branch=z9hG4bKa",
            ("203.0.113.9", 5060),
            "SIP/2.0/UDP 203.0.113.9:5060;branch=z9hG4bKa",
        ),
    ],
)
def test_the_top_via_records_where_a_request_came_from(via, source, marked):
    request = parse(
        (
            f"OPTIONS sip:relay@x SIP/2.0\r\nVia: {via}\r\n"
            "Via: SIP/2.0/UDP 10.9.9.9;branch=z9hG4bKb\r\nFrom: <sip:a@x>;tag=1\r\n"
            "To: <sip:relay@x>\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n\r\n"
        ).encode()
    )
    mark_received(request, source)

    assert request.get_all("Via") == [marked, "SIP/2.0/UDP 10.9.9.9;branch=z9hG4bKb"]


def _latch():
    latch = Latch()
    latch.start(("192.0.2.10", 4000), enabled=True)
    return latch


def test_media_latches_onto_a_source_with_one_ssrc_in_sequence_and_drops_the_rest():
    latch = _latch()
    nat = ("203.0.113.5", 61000)

    heard = [latch.admit(nat, 77, seq, now=0.1 * seq) for seq in (10, 11, 12, 13)]

    assert heard == [False, False, True, True]  # the third packet in sequence latches
    assert latch.source == nat
    assert not latch.admit(("198.51.100.66", 4000), 77, 14, now=1.0)  # an injector
    assert not latch.admit(("192.0.2.10", 4000), 5, 1, now=1.0)  # even from the SDP address


def test_media_from_the_sdp_address_is_heard_before_any_latch():
    latch = _latch()

    assert latch.admit(("192.0.2.10", 4000), 1, 100, now=0.0)
    assert not latch.admit(("203.0.113.5", 61000), 2, 100, now=0.0)


def test_a_source_that_changes_ssrc_or_skips_sequence_numbers_is_not_latched():
    latch = _latch()
    other = ("203.0.113.5", 61000)

    for ssrc, seq in ((1, 10), (2, 11), (1, 12), (1, 14), (1, 16)):
        assert not latch.admit(other, ssrc, seq, now=0.0)
    assert latch.source is None


def test_no_source_is_latched_once_the_first_seconds_are_over():
    latch = _latch()
    late = LATCH_SECONDS + 1
    assert not latch.admit(("198.51.100.1", 9), 1, 1, now=0.0)  # the stream's first packet
    heard = [latch.admit(("203.0.113.5", 61000), 3, seq, now=late) for seq in (1, 2, 3, 4)]

    assert heard == [False] * 4
    assert latch.source is None


def test_with_latching_off_only_the_sdp_host_is_heard():
    latch = Latch()
    latch.start(("192.0.2.10", 4000), enabled=False)

    assert latch.admit(("192.0.2.10", 4002), 1, 1, now=0.0)
    assert not any(latch.admit(("203.0.113.5", 61000), 1, s, now=0.0) for s in range(1, 6))


# --- SRTP keys in SDP (RFC 4568) ------------------------------------------------------------------
def test_an_srtp_offer_carries_one_key_of_relays_suite_and_parses_back():
    crypto = sdp.new_crypto()
    offer = sdp.offer(address="192.0.2.1", port=4000, crypto=crypto, profile=sdp.SECURE)

    assert b"m=audio 4000 RTP/SAVP 0 8 101" in offer
    assert offer.count(b"a=crypto:") == 1
    media = sdp.parse_offer(offer)
    assert (media.profile, media.crypto) == (sdp.SECURE, crypto)


def test_the_answer_keeps_the_offers_tag_and_profile_with_a_key_of_its_own():
    theirs = sdp.Crypto(tag=7, key=bytes(range(30)))
    offer = sdp.offer(address="192.0.2.1", port=4000, crypto=theirs)  # best effort: RTP/AVP
    media = sdp.parse_offer(offer)
    ours = sdp.new_crypto()

    answer = sdp.parse_answer(sdp.answer(address="192.0.2.2", port=5000, media=media, crypto=ours))

    assert (answer.profile, answer.crypto) == (sdp.PLAIN, sdp.Crypto(tag=7, key=ours.key))


@pytest.mark.parametrize(
    "line",
    [
        "a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:" + "A" * 40,  # another suite
        "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:" + "A" * 20,  # a short key
        "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:" + "A" * 40 + "|2^20|1:4",  # an MKI
        "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:not*base64*at*all*not*base64*at*all",
        "a=crypto:x AES_CM_128_HMAC_SHA1_80 inline:" + "A" * 40,
    ],
)
def test_a_crypto_line_relay_cannot_use_is_no_key(line):
    body = (
        "v=0\r\no=x 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\n"
        f"m=audio 4000 RTP/SAVP 8\r\na=rtpmap:8 PCMA/8000\r\n{line}\r\n"
    ).encode()

    assert sdp.parse_offer(body).crypto is None


def test_a_media_profile_other_than_rtp_is_refused():
    body = b"v=0\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\nm=audio 4000 UDP/TLS/RTP/SAVPF 8\r\n"
    with pytest.raises(sdp.SdpError):
        sdp.parse_offer(body)


async def test_srtp_audio_is_heard_only_with_the_right_key():
    """Two of Relay's streams on loopback, keyed as an offer and an answer would key them;
    a third party with the wrong key is never heard."""
    ours, theirs = sdp.new_crypto(), sdp.new_crypto()
    sender, receiver = RtpStream(payload_type=0), RtpStream(payload_type=0)
    ports = []
    for stream in (sender, receiver):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
        await stream.open("127.0.0.1", ports[-1])
    sender.secure(local_key=ours.key, remote_key=theirs.key)
    receiver.secure(local_key=theirs.key, remote_key=ours.key)
    sender.expect("127.0.0.1", ports[1])
    receiver.expect("127.0.0.1", ports[0])
    forger = RtpStream(payload_type=0)
    await forger.open("127.0.0.1", 0)
    forger.secure(local_key=sdp.new_crypto().key, remote_key=ours.key)
    forger.expect("127.0.0.1", ports[1])
    try:
        await forger.play(b"\x10" * 160 * 5)
        await sender.play(b"\x10" * 160 * 10)  # loud mu-law
        async with asyncio.timeout(5):
            while receiver.received.packets < 10:
                await asyncio.sleep(0.01)
    finally:
        for stream in (sender, receiver, forger):
            stream.close()

    assert receiver.received.packets == 10  # the forger's 5 were dropped
    assert receiver.received.loud_packets == 10


async def test_the_sip_socket_asks_for_a_receive_buffer_fit_for_a_burst_of_answers():
    """As large as RECEIVE_BUFFER_BYTES, or as the kernel allows (net.core.rmem_max); Linux
    reports twice what was granted."""
    allowed = int(Path("/proc/sys/net/core/rmem_max").read_text())
    transport = UdpTransport(lambda message, source: None)
    await transport.start("127.0.0.1", 0)
    try:
        granted = transport.sock.get_extra_info("socket").getsockopt(
            socket.SOL_SOCKET, socket.SO_RCVBUF
        )
    finally:
        await transport.close()

    assert granted >= 2 * min(RECEIVE_BUFFER_BYTES, allowed)


# --- the transactions on the agent's loop (ua.TransactionDriver) ---------------------------------
class _WireTap:
    """A transport that keeps what it is given to send, and sends nothing."""

    name, reliable = "UDP", False

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def send(self, message: Message, destination) -> None:
        self.sent.append(message)

    async def close(self) -> None:
        pass


def _tapped_agent(**timers) -> tuple[UserAgent, _WireTap]:
    ua = UserAgent(UaConfig(trunk_uri="sip:127.0.0.1:5060", timers=Timers(**timers)))
    ua.transport = tap = _WireTap()
    return ua, tap


async def _settle() -> None:
    """Let the tasks a message started run (the request's handling, then the sends)."""
    for _ in range(10):
        await asyncio.sleep(0)


STRAY_BYE = (
    b"BYE sip:relay@127.0.0.1 SIP/2.0\r\n"
    b"Via: SIP/2.0/UDP 192.0.2.7:5060;branch=z9hG4bKstray\r\n"
    b"From: <sip:caller@192.0.2.7>;tag=theirs\r\n"
    b"To: <sip:relay@127.0.0.1>;tag=gone\r\n"
    b"Call-ID: over@192.0.2.7\r\n"
    b"CSeq: 2 BYE\r\n"
    b"Max-Forwards: 70\r\n\r\n"
)


async def test_a_request_sent_again_gets_the_same_response_again_from_its_transaction():
    ua, tap = _tapped_agent()

    ua._on_message(parse(STRAY_BYE), ("192.0.2.7", 5060))
    await _settle()
    ua._on_message(parse(STRAY_BYE), ("192.0.2.7", 5060))
    await _settle()
    await ua.close()

    assert [response.status for response in tap.sent] == [481, 481]
    assert tap.sent[0] is tap.sent[1]  # resent by the transaction, not answered anew


async def test_a_request_nobody_answers_is_resent_then_given_up_at_timer_f():
    ua, tap = _tapped_agent(t1=0.005, t2=0.04)  # timer F: 0.32 s
    bye = Message(method="BYE", uri="sip:callee@127.0.0.1")
    bye.headers = parse(STRAY_BYE).headers

    async with asyncio.timeout(5):
        response = await ua.request(bye, ("127.0.0.1", 5060))

    assert response is None
    assert len(tap.sent) >= 6 and all(message is bye for message in tap.sent)
    assert ua.client_transactions == {}


async def test_a_final_response_ends_the_request_and_its_repeats_are_absorbed_until_timer_k():
    ua, tap = _tapped_agent(t4=0.05)
    bye = Message(method="BYE", uri="sip:callee@127.0.0.1")
    bye.headers = parse(STRAY_BYE).headers
    ok = response_to(bye, 200, "OK")
    asked = asyncio.ensure_future(ua.request(bye, ("127.0.0.1", 5060)))
    await _settle()

    ua._on_message(parse(ok.encode()), ("127.0.0.1", 5060))
    response = await asked
    ua._on_message(parse(ok.encode()), ("127.0.0.1", 5060))  # absorbed
    held = list(ua.client_transactions)
    async with asyncio.timeout(5):
        while ua.client_transactions:
            await asyncio.sleep(0.01)

    assert response.status == 200
    assert held == ["z9hG4bKstray:BYE"]  # kept for timer K, then dropped
    assert tap.sent == [bye]


# --- re-INVITEs: offer and answer (RFC 3264 §6.1, §8) ---------------------------------------------
def _offer(*, session="", media="", address="192.0.2.1", port=4000, formats="8 101", extra=""):
    return (
        f"v=0\r\no=x 1 1 IN IP4 {address}\r\ns=-\r\nc=IN IP4 {address}\r\nt=0 0\r\n{session}"
        f"m=audio {port} RTP/AVP {formats}\r\na=rtpmap:8 PCMA/8000\r\n"
        f"a=rtpmap:101 telephone-event/8000\r\n{media}{extra}"
    ).encode()


@pytest.mark.parametrize(
    "session,media,answered",
    [
        ("", "", "sendrecv"),  # no attribute: sendrecv (RFC 4566 §6)
        ("", "a=sendrecv\r\n", "sendrecv"),
        ("", "a=sendonly\r\n", "recvonly"),  # hold
        ("", "a=inactive\r\n", "inactive"),  # hold, neither way
        ("", "a=recvonly\r\n", "sendonly"),
        ("a=sendonly\r\n", "", "recvonly"),  # at the session level
        ("a=sendonly\r\n", "a=sendrecv\r\n", "sendrecv"),  # the stream's own wins
    ],
)
def test_the_answer_mirrors_the_offers_direction(session, media, answered):
    offered = sdp.parse_offer(_offer(session=session, media=media))

    answer = sdp.answer(address="192.0.2.2", port=5000, media=offered)

    assert f"a={answered}\r\n".encode() in answer
    lines = answer.decode().split("\r\n")
    assert [line for line in lines if line[2:] in sdp.DIRECTIONS] == [f"a={answered}"]
    assert sdp.parse_answer(answer).direction == answered
    assert offered.receives == (answered in ("sendrecv", "sendonly"))


@pytest.mark.parametrize(
    "media,answered",
    [("", "recvonly"), ("a=sendonly\r\n", "recvonly"), ("a=recvonly\r\n", "inactive")],
    ids=["sendrecv", "sendonly", "recvonly"],
)
def test_an_offer_at_0_0_0_0_is_rfc_2543s_hold_and_is_sent_nothing(media, answered):
    offered = sdp.parse_offer(_offer(address="0.0.0.0", media=media))  # noqa: S104

    assert not offered.receives
    assert sdp.answer_direction(offered) == answered


def test_a_changed_description_keeps_its_origin_and_adds_one_to_its_version():
    first = sdp.answer(address="192.0.2.2", port=5000, media=sdp.parse_offer(_offer()))
    held = sdp.answer(
        address="192.0.2.2", port=5000, media=sdp.parse_offer(_offer(media="a=sendonly\r\n"))
    )
    origin = next(line for line in first.decode().split("\r\n") if line.startswith("o="))

    second = sdp.revised(first, held)
    third = sdp.revised(second, first)

    fields = origin.split(" ")
    for revision, version, direction in ((second, 1, b"a=recvonly"), (third, 2, b"a=sendrecv")):
        assert revision.decode().split("\r\n")[1] == " ".join(
            [*fields[:2], str(int(fields[2]) + version), *fields[3:]]
        )
        assert direction in revision
    # The same answer again (a session refresh): the same SDP, version and all.
    again = sdp.answer(address="192.0.2.2", port=5000, media=sdp.parse_offer(_offer()))
    assert sdp.revised(first, again) == first


def test_a_re_offer_keeps_the_calls_codec_when_it_still_offers_it():
    offer = _offer(formats="0 8 101")

    assert sdp.parse_offer(offer).payload_type == 0
    assert sdp.parse_offer(offer, prefer=8).payload_type == 8
    assert sdp.parse_offer(_offer(formats="0 101"), prefer=8).payload_type == 0


def test_an_offer_whose_stream_is_refused_by_port_0_is_an_sdp_error():
    with pytest.raises(sdp.SdpError, match="port 0"):
        sdp.parse_offer(_offer(port=0))


OURS = sdp.Crypto(tag=1, key=bytes(range(30)))
THEIRS = sdp.Crypto(tag=3, key=bytes(range(30, 60)))


class _Call(Dialog):
    """A dialog with a stream, as a call has once answered (unbound: nothing is sent)."""

    def __init__(self, *, secure: bool = False) -> None:
        super().__init__(
            _Ua(),
            sip_call_id="c@x",
            local_header="<sip:relay@a.example>;tag=ours",
            remote_header="<sip:bob@b.example>;tag=theirs",
            remote_target="sip:bob@198.51.100.5:5070",
        )
        self.secure = secure
        self.stream = RtpStream(payload_type=8)
        self.rtp_port = 5000
        offered = sdp.parse_offer(_offer(extra=THEIRS.line() + "\r\n" if secure else ""))
        if secure:
            self.stream.secure(local_key=OURS.key, remote_key=THEIRS.key)
        self.follow(offered)
        self.local_sdp = sdp.answer(
            address="192.0.2.2", port=5000, media=offered, crypto=OURS if secure else None
        )

    @property
    def local_crypto(self):
        return OURS if self.secure else None


def _version(body: bytes) -> int:
    return int(body.decode().split("\r\n")[1].split(" ")[2])


def test_a_re_offer_to_hold_and_back_moves_the_stream_and_versions_the_answer():
    call = _Call()
    first = call.local_sdp

    call.take_offer(_offer(address="192.0.2.9", port=4010, media="a=sendonly\r\n"))

    assert call.stream.held and call.stream.remote == ("192.0.2.9", 4010)
    assert b"a=recvonly" in call.local_sdp and _version(call.local_sdp) == _version(first) + 1
    call.take_offer(_offer(address="0.0.0.0"))  # noqa: S104 - RFC 2543's hold
    assert call.stream.held and call.stream.remote == ("192.0.2.9", 4010)
    assert b"a=recvonly" in call.local_sdp and _version(call.local_sdp) == _version(first) + 1
    call.take_offer(_offer(address="192.0.2.9", port=4010))
    assert not call.stream.held
    assert b"a=sendrecv" in call.local_sdp and _version(call.local_sdp) == _version(first) + 2


@pytest.mark.parametrize(
    "secure,offer,reason",
    [
        (False, _offer(formats="18"), "no common codec"),
        (False, _offer().replace(b"RTP/AVP", b"RTP/SAVP"), "RTP/SAVP"),
        (True, _offer(media="a=sendonly\r\n"), "no SRTP key"),
        (False, b"v=0\r\n", "no audio stream"),
    ],
    ids=["no-common-codec", "savp-without-srtp", "srtp-dropped", "no-stream"],
)
def test_a_re_offer_relay_cannot_take_changes_nothing(secure, offer, reason):
    call = _Call(secure=secure)
    before = (call.local_sdp, call.stream.remote, call.stream.held, call.stream.payload_type)

    with pytest.raises(sdp.SdpError, match=reason):
        call.take_offer(offer)

    assert (call.local_sdp, call.stream.remote, call.stream.held, call.stream.payload_type) == (
        before
    )


def test_an_encrypted_call_takes_the_far_ends_new_key_from_a_re_offer():
    call = _Call(secure=True)
    rekeyed = sdp.Crypto(tag=4, key=bytes(range(60, 90)))

    call.take_offer(_offer(extra=rekeyed.line() + "\r\n"))

    assert call.stream.remote_key == rekeyed.key
    assert sdp.parse_answer(call.local_sdp).crypto == sdp.Crypto(tag=4, key=OURS.key)


async def test_a_re_invite_from_a_source_no_invite_may_come_from_is_refused_and_changes_nothing():
    call = _Call()
    answered = []

    async def respond(request, status, reason, destination):
        answered.append((status, destination))

    call.ua.accepts_source = lambda host: host == "192.0.2.1"
    call.ua.respond = respond
    reinvite = Message(method="INVITE", uri="sip:relay@192.0.2.2")
    reinvite.headers = [
        ("Via", "SIP/2.0/UDP 203.0.113.7:5060;branch=z9hG4bKx"),
        ("From", "<sip:bob@b.example>;tag=theirs"),
        ("To", "<sip:relay@a.example>;tag=ours"),
        ("Call-ID", "c@x"),
        ("CSeq", "2 INVITE"),
    ]
    reinvite.body = _offer(address="203.0.113.7", media="a=inactive\r\n")
    before = call.local_sdp

    await call.on_request(reinvite, ("203.0.113.7", 5060))

    assert answered == [(403, ("203.0.113.7", 5060))]
    assert (call.local_sdp, call.stream.remote, call.stream.held) == (
        before,
        ("192.0.2.1", 4000),
        False,
    )
