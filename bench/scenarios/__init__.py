"""Every scenario of bench/run.py, by the name `--only` takes, in the order a run takes them.

The scenarios live in one module per family (HTTP, WebSocket, SIP) so that each can be read in
one sitting; this list is the one place that names them and fixes their order. The order matters:
http_me sets its plain view beside http_bare_asgi's figure, http_logins reuses the plain view that
http_history measured on one connection, and ws_call_acks takes ws_ping's round trip as its
reference (without it, its p99 has no verdict). Each appends Rows to the Bench; none decides pass
or fail of the run: a missed target is a finding, only a scenario that cannot run is an error.

Imported after Django is set up (run.py's fixtures.setup()): bench/sip.py, which the SIP
scenarios import, imports the models.
"""

from __future__ import annotations

from bench.scenarios.common import Bench
from bench.scenarios.http import embedded_me, http_bare_asgi, http_history, http_me
from bench.scenarios.http_logins import http_logins
from bench.scenarios.machine_detection import machine_detection
from bench.scenarios.round_trips import round_trips
from bench.scenarios.sip_browser import sip_browser_50
from bench.scenarios.sip_calls import sip_50_calls
from bench.scenarios.sip_edge import sip_edge_400, sip_edge_rolling
from bench.scenarios.sip_forward import sip_forward_100, sip_forward_cpu
from bench.scenarios.sip_legs import sip_200_calls, sip_tls_srtp_cpu
from bench.scenarios.sip_recorded import sip_recorded
from bench.scenarios.sip_ring_group import sip_ring_group
from bench.scenarios.sip_scripted import sip_scripted_100
from bench.scenarios.sip_speech import sip_speech_gather
from bench.scenarios.sip_transfer import sip_transfer
from bench.scenarios.transcribe import transcribe_rtf
from bench.scenarios.voicemail import voicemail_mail
from bench.scenarios.ws import (
    ws_call_acks,
    ws_call_acks_embedded,
    ws_idle,
    ws_ping,
    ws_status_push,
)

__all__ = ["SCENARIOS", "Bench"]

SCENARIOS = [("http_bare_asgi", http_bare_asgi), ("http_me", http_me),
             ("round_trips", round_trips), ("http_history", http_history),
             ("http_logins", http_logins),
             ("embedded_me", embedded_me), ("ws_idle", ws_idle), ("ws_ping", ws_ping),
             ("ws_call_acks", ws_call_acks), ("ws_call_acks_embedded", ws_call_acks_embedded),
             ("ws_status_push", ws_status_push), ("sip_50_calls", sip_50_calls),
             ("sip_tls_srtp_cpu", sip_tls_srtp_cpu), ("sip_200_calls", sip_200_calls),
             ("sip_forward_cpu", sip_forward_cpu),
             ("sip_forward_100", sip_forward_100), ("sip_browser_50", sip_browser_50),
             ("sip_ring_group", sip_ring_group), ("sip_recorded", sip_recorded),
             ("sip_transfer", sip_transfer),
             ("sip_scripted_100", sip_scripted_100), ("sip_speech_gather", sip_speech_gather),
             ("sip_edge_400", sip_edge_400),
             ("sip_edge_rolling", sip_edge_rolling),
             ("transcribe_rtf", transcribe_rtf), ("machine_detection", machine_detection),
             ("voicemail_mail", voicemail_mail)]  # fmt: skip
