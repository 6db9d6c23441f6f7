"""Scales of a run: `full` for docs/benchmarks.md (under 10 minutes on 2 cores), `smoke` for CI
(every scenario at tiny scale, under a minute)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    http_seconds: float  # each wrk run
    saturation_connections: int
    history_records: int
    history_offsets: dict  # status (None = all) -> the deep offset measured
    history_sql_runs: int
    logins_at_once: int  # distinct users logging in at the same moment, one request each
    logins_at_once_rounds: int  # such bursts, one after the other's last answer
    login_flood: int  # the flood: this many logins (distinct users) at the same moment
    flood_me_rate: float  # /api/user/me req/s, open loop, beside the flood and before it
    ws_idle_steps: tuple[int, ...]  # cumulative idle connections
    ws_idle_connections_per_process: int
    idle_seconds: float
    ws_ping_rates: tuple[int, ...]
    ws_ping_connections: tuple[int, ...]
    ws_seconds: float  # each ws_ping/ws_call_acks run
    ws_call_acks_connections: int
    ws_call_acks_window: int
    ws_call_acks_burst_sockets: int  # one user each
    ws_call_acks_burst_calls: int  # per socket, sent back to back
    ws_status_push_connections: int
    ws_status_push_rate: float
    ws_status_push_seconds: float
    ws_status_push_settle: float  # how long the last calls get to finish after the submits stop
    client_processes: int  # ws_ping, ws_call_acks and ws_status_push load-generator processes
    sip_50_calls: int  # submitted at once, all meant to be up together
    sip_50_agents: int  # SIP_AGENTS
    sip_50_agent_calls: int  # SIP_MAX_CONCURRENT_CALLS: agents x this >= sip_50_calls
    sip_50_sentences: int  # message length: 0 speaks about 2 s, 2 about 14 s (bench/sip.py)
    sip_50_latency_calls: int  # per round: cache misses, then the same texts as hits
    sip_50_latency_batch: int  # submitted together, so claiming is not queue-bound
    sip_50_render_texts: int  # in-process Speech.render timings
    sip_cost_calls: int  # sip_tls_srtp_cpu: calls at once on one agent, per leg
    sip_cost_rounds: int  # legs of each transport, alternated UDP, TLS, TLS, UDP, ...
    sip_cost_sentences: int  # one message for every call: 1 speaks about 8 s
    sip_many_calls: int  # sip_200_calls: submitted at once to one agent, all to be up together
    sip_many_sentences: int  # 2 speaks about 14 s, so the last answered still overlaps the first
    sip_many_tls: bool  # sip_200_calls also over TLS + SRTP through Kamailio
    sip_many_alone: int  # sip_200_calls' baseline of steady audio: these calls on an agent alone
    forward_cost_calls: int  # sip_forward_cpu: calls at once on one agent, per leg
    forward_cost_rounds: int  # legs of each kind, alternated outbound, bridged, bridged, ...
    forward_cost_sentences: int  # the message played, and said by the bridged callers
    forward_many_bridges: int  # sip_forward_100: forwarded calls placed at once, one agent
    forward_many_talk_seconds: float  # each held this long, so the last bridged overlaps all
    forward_floor_seconds: float  # the RTP meter alone, socket to socket (its floor)
    browser_calls: int  # sip_browser_50: calls from the browser at once on one agent
    browser_talk_seconds: float  # each tab talks this long (and the baseline's callers)
    scripted_calls: int  # sip_scripted_100: scripted calls at once on one agent, per leg
    scripted_rounds: int  # legs of each kind, alternated scripted, message, message, ...
    edge_calls: int  # sip_edge_400: calls through the edge to two agents, all up together
    voicemail_mails: int  # voicemail_mail: messages timed to their mail, per engine
    edge_talk_seconds: float  # each caller hangs up this long after it starts its message (the
    # pcap is 7.1 s; more than VOICEMAIL_SILENCE_SECONDS of silence after it ends the message)
    rolling_calls: int  # sip_edge_rolling: calls placed while both agents restart
    rolling_per_minute: int  # their steady rate
    transcribe_messages: int  # transcribe_rtf: voicemails of 4-9 s transcribed one by one
    speech_gathers: int  # sip_speech_gather: speech gathers at once on one agent
    ring_group_calls: int  # sip_ring_group: calls at once to a ring group, and its baseline's
    ring_group_talk_seconds: float  # each caller talks this long once answered
    ring_group_rounds: int  # batches of each kind, alternated forwarded, ring, ring, ...
    recorded_calls: int  # sip_recorded: recorded forwarded calls at once, and its baseline's
    recorded_talk_seconds: float  # each caller talks this long once answered
    recorded_rounds: int  # batches of each kind, alternated unrecorded, recorded, ...
    transfer_calls: int  # sip_transfer: forwarded calls whose phone hands them on by REFER
    transfer_rate: float  # ... placed at this many a second


FULL = Profile(
    name="full",
    http_seconds=5,
    saturation_connections=50,
    history_records=1_000_000,
    # The missed rows are 300,000 of the 1,000,000: offset 500,000 would be past their end
    # (an empty page), so missed is measured at 250,000, as in the query plans below.
    history_offsets={None: 500_000, "missed": 250_000},
    history_sql_runs=20,
    logins_at_once=16,
    logins_at_once_rounds=5,
    login_flood=200,
    flood_me_rate=100,
    ws_idle_steps=(1_000, 5_000, 10_000),
    ws_idle_connections_per_process=1_250,
    idle_seconds=5,
    ws_ping_rates=(500, 1_000, 2_000),
    ws_ping_connections=(100, 1_000),
    ws_seconds=3,
    ws_call_acks_connections=100,
    ws_call_acks_window=2,
    ws_call_acks_burst_sockets=20,
    ws_call_acks_burst_calls=100,
    ws_status_push_connections=50,
    ws_status_push_rate=20,
    ws_status_push_seconds=6,
    ws_status_push_settle=3.0,
    client_processes=2,
    sip_50_calls=50,
    sip_50_agents=2,
    sip_50_agent_calls=30,
    sip_50_sentences=2,
    sip_50_latency_calls=10,
    sip_50_latency_batch=2,
    sip_50_render_texts=5,
    sip_cost_calls=30,
    sip_cost_rounds=2,
    sip_cost_sentences=1,
    sip_many_calls=200,
    sip_many_sentences=2,
    sip_many_tls=True,
    sip_many_alone=1,
    forward_cost_calls=30,
    forward_cost_rounds=2,
    forward_cost_sentences=1,
    forward_many_bridges=100,
    forward_many_talk_seconds=20,
    forward_floor_seconds=5,
    browser_calls=50,
    browser_talk_seconds=10,
    scripted_calls=100,
    scripted_rounds=2,
    edge_calls=400,
    voicemail_mails=10,
    edge_talk_seconds=8,
    rolling_calls=100,
    rolling_per_minute=50,
    transcribe_messages=12,
    speech_gathers=20,
    ring_group_calls=50,
    ring_group_talk_seconds=10,
    ring_group_rounds=2,
    recorded_calls=50,
    recorded_talk_seconds=10,
    recorded_rounds=2,
    transfer_calls=50,
    transfer_rate=10,
)

SMOKE = Profile(
    name="smoke",
    http_seconds=1,
    saturation_connections=10,
    history_records=2_000,
    history_offsets={None: 1_000, "missed": 500},
    history_sql_runs=3,
    logins_at_once=16,
    logins_at_once_rounds=1,
    login_flood=40,
    flood_me_rate=20,
    ws_idle_steps=(20, 50, 100),
    ws_idle_connections_per_process=50,
    idle_seconds=0.5,
    ws_ping_rates=(50, 100),
    ws_ping_connections=(5, 20),
    ws_seconds=0.5,
    ws_call_acks_connections=5,
    ws_call_acks_window=2,
    ws_call_acks_burst_sockets=4,
    ws_call_acks_burst_calls=10,
    ws_status_push_connections=3,
    ws_status_push_rate=5,
    ws_status_push_seconds=1,
    ws_status_push_settle=1.5,
    client_processes=2,
    sip_50_calls=5,
    sip_50_agents=2,
    sip_50_agent_calls=5,
    sip_50_sentences=0,
    sip_50_latency_calls=2,
    sip_50_latency_batch=1,
    sip_50_render_texts=2,
    sip_cost_calls=2,
    sip_cost_rounds=1,
    sip_cost_sentences=0,
    sip_many_calls=4,
    sip_many_sentences=0,
    sip_many_tls=False,
    sip_many_alone=1,
    forward_cost_calls=2,
    forward_cost_rounds=1,
    forward_cost_sentences=0,
    forward_many_bridges=5,
    forward_many_talk_seconds=4,
    forward_floor_seconds=1,
    browser_calls=3,
    browser_talk_seconds=3,
    scripted_calls=3,
    scripted_rounds=1,
    edge_calls=4,
    voicemail_mails=2,
    edge_talk_seconds=0,
    rolling_calls=4,
    rolling_per_minute=60,
    transcribe_messages=2,
    speech_gathers=2,
    ring_group_calls=4,
    ring_group_talk_seconds=3,
    ring_group_rounds=1,
    recorded_calls=4,
    recorded_talk_seconds=4,
    recorded_rounds=1,
    transfer_calls=3,
    transfer_rate=3,
)
