"""The SIP user agent's own parts: what it accepts off the wire, and what it answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telephony.sip import auth, sdp
from telephony.sip.message import Message, SipParseError, params, parse, response_to, uri_of

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
    assert message.call_id == "abc@10.0.0.1"
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
