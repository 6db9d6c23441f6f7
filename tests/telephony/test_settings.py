"""A wrong SIP setting stops start-up with one clear line naming it."""

from __future__ import annotations

from functools import partial

import pytest

from tests import live, settings_env

GOOD = {"TELEPHONY_PROVIDER": "sip", "SIP_TRUNK_URI": "sip:127.0.0.1:5062"}
manage = partial(settings_env.manage, **GOOD)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TELEPHONY_PROVIDER", "twilio"),
        ("SIP_TRUNK_URI", ""),
        ("SIP_TRUNK_URI", "http://trunk.example.com"),
        ("SIP_TRANSPORT", "sctp"),
        ("SIP_TLS_CA_FILE", "/nonexistent/ca.pem"),
        ("SIP_TLS_CERT_FILE", "/etc/hostname"),  # without SIP_TLS_KEY_FILE
        ("SIP_SRTP", "maybe"),
        ("SIP_TRUNK_URI", "sip:trunk.example.com;transport=tcp"),  # SIP_TRANSPORT is udp
        ("SIP_TRUNK_URI", "sip:trunk.example.com;transport=sctp"),
        ("SIP_DNS_SERVERS", "dns.example.com"),
        ("SIP_DNS_SERVERS", "192.0.2.53:0"),
        ("SIP_DNS_SERVERS", "192.0.2.53,192.0.2.54:dns"),
        ("SIP_BIND", "5060"),
        ("SIP_BIND", "0.0.0.0:99999"),
        ("RTP_PORT_RANGE", "20000"),
        ("RTP_PORT_RANGE", "30000-20000"),
        ("RTP_PORT_RANGE", "20000-20010"),
        ("SIP_RING_TIMEOUT", "0"),
        ("SIP_MAX_CONCURRENT_CALLS", "0"),
        ("SIP_USERNAME", "relay"),
        ("TTS_DEFAULT_LANGUAGE", "klingon"),
    ],
)
def test_a_wrong_sip_setting_stops_start_up_with_one_line(name, value):
    live.assert_refused_at_start_up(manage("check", **{name: value}), name)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SIP_TRUNK_URI": "sip:trunk.example.com"},
        {"SIP_TRUNK_URI": "sip:trunk.example.com;transport=tcp", "SIP_TRANSPORT": "tcp"},
        {"SIP_DNS_SERVERS": "192.0.2.53,192.0.2.54:5353,2001:db8::53,[2001:db8::54]:5353"},
    ],
)
def test_good_sip_settings_start(env):
    result = manage("check", **env)

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("given", "named"),
    [
        # SDES keys travel in the SDP: never over a transport in clear.
        ({"SIP_SRTP": "required"}, "SIP_SRTP"),
        ({"SIP_SRTP": "optional", "SIP_TRANSPORT": "tcp"}, "SIP_SRTP"),
        # A sips: trunk is never called over UDP or TCP.
        ({"SIP_TRUNK_URI": "sips:trunk.example.com", "SIP_TRANSPORT": "udp"}, "SIP_TRUNK_URI"),
    ],
)
def test_srtp_and_sips_need_tls(given, named):
    live.assert_refused_at_start_up(manage("check", **given), named)


def test_a_sips_trunk_with_srtp_starts_over_tls_without_naming_the_transport():
    result = manage("check", SIP_TRUNK_URI="sips:trunk.example.com", SIP_SRTP="required")

    assert result.returncode == 0, result.stderr
