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
    w1_steps: tuple[int, ...]  # cumulative idle connections
    w1_connections_per_process: int
    idle_seconds: float
    w2_rates: tuple[int, ...]
    w2_connections: tuple[int, ...]
    ws_seconds: float  # each W2/W3 run
    w3_connections: int
    w3_window: int
    w3_burst_sockets: int  # one user each
    w3_burst_calls: int  # per socket, sent back to back
    w4_connections: int
    w4_rate: float
    w4_seconds: float
    w4_settle: float  # how long the last calls get to finish after the submits stop
    client_processes: int  # W2-W4 load-generator processes
    s1_calls: int  # submitted at once, all meant to be up together
    s1_agents: int  # SIP_AGENTS
    s1_agent_calls: int  # SIP_MAX_CONCURRENT_CALLS: agents x this >= s1_calls
    s1_sentences: int  # message length: 0 speaks about 2 s, 2 about 14 s (bench/sip.py)
    s1_latency_calls: int  # per round: cache misses, then the same texts as hits
    s1_latency_batch: int  # submitted together, so claiming is not queue-bound
    s1_render_texts: int  # in-process Speech.render timings
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
    w1_steps=(1_000, 5_000, 10_000),
    w1_connections_per_process=1_250,
    idle_seconds=5,
    w2_rates=(500, 1_000, 2_000),
    w2_connections=(100, 1_000),
    ws_seconds=3,
    w3_connections=100,
    w3_window=2,
    w3_burst_sockets=20,
    w3_burst_calls=100,
    w4_connections=50,
    w4_rate=20,
    w4_seconds=6,
    w4_settle=3.0,
    client_processes=2,
    s1_calls=50,
    s1_agents=2,
    s1_agent_calls=30,
    s1_sentences=2,
    s1_latency_calls=10,
    s1_latency_batch=2,
    s1_render_texts=5,
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
    w1_steps=(20, 50, 100),
    w1_connections_per_process=50,
    idle_seconds=0.5,
    w2_rates=(50, 100),
    w2_connections=(5, 20),
    ws_seconds=0.5,
    w3_connections=5,
    w3_window=2,
    w3_burst_sockets=4,
    w3_burst_calls=10,
    w4_connections=3,
    w4_rate=5,
    w4_seconds=1,
    w4_settle=1.5,
    client_processes=2,
    s1_calls=5,
    s1_agents=2,
    s1_agent_calls=5,
    s1_sentences=0,
    s1_latency_calls=2,
    s1_latency_batch=1,
    s1_render_texts=2,
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
)
