"""A wrong SIP setting stops start-up with one clear line naming it."""

from __future__ import annotations

from functools import partial

import pytest

from harness import live
from tests import settings_env

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


# Two agents of 50 calls, two ports a call: 200 ports, counted with both ends (issue 55).
TWO_FULL_AGENTS = {"SIP_AGENTS": "2", "SIP_MAX_CONCURRENT_CALLS": "50"}


def test_an_rtp_range_of_exactly_two_ports_a_call_starts():
    result = manage("check", RTP_PORT_RANGE="38000-38199", **TWO_FULL_AGENTS)

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "short",
    [
        "38000-38198",  # one port short
        "38001-38200",  # 200 ports, but agent 0's share (38001-38100) holds 49 even pairs
    ],
)
def test_an_rtp_range_one_port_short_is_refused(short):
    result = manage("check", RTP_PORT_RANGE=short, **TWO_FULL_AGENTS)

    live.assert_refused_at_start_up(result, "RTP_PORT_RANGE")


def test_the_range_the_check_accepts_gives_each_agent_its_calls(settings):
    """What the check counts is what the agents take: at the boundary each agent's pool
    holds SIP_MAX_CONCURRENT_CALLS pairs, inside the range and apart from the other's."""
    from telephony.agent import agent_config
    from telephony.sip.ua import UserAgent

    settings.SIP_TRUNK_URI = "sip:127.0.0.1:5062"
    settings.RTP_PORTS, settings.SIP_AGENTS = (38000, 38199), 2
    pools = [list(UserAgent(agent_config(index)).free_rtp_ports) for index in (0, 1)]

    assert [len(pool) for pool in pools] == [50, 50]
    ports = {port + rtcp for pool in pools for port in pool for rtcp in (0, 1)}
    assert len(ports) == 200 and min(ports) == 38000 and max(ports) == 38199
