"""How each of bench/run.py's figures is measured: the notes under the results table of
docs/benchmarks.md and var/bench-*.md, one paragraph a scenario."""

METHOD_NOTES = """\
### How each figure is measured

- **Ratio** is value / baseline, both measured in this run on this machine. For req/s higher
  is better; for latency and memory lower is better.
- **Server CPU** is the measured server's CPU time per wall second (100% = one core), summed
  over its processes with psutil: gunicorn's master and its workers (a replaced worker's
  through its master) for HTTP, runrelay's Daphne process(es) for the WebSocket;
  **load-gen CPU** is the same for wrk or for the WebSocket client processes. Server, load
  generator, PostgreSQL and Redis share the machine's 2 cores, so a load-gen figure near 100%
  means the client, not the server, may be the limit.
- **http_bare_asgi** (context): `bench/bare_app.py`, a framework-free ASGI app, under Daphne
  (Relay's WebSocket server, and ws_idle/ws_ping's baseline) and uvicorn (h11, no uvloop unless
  installed). wrk, 2 threads, closed loop.
- **Plain Django view**: `bench/plain_urls.py`, one function returning `JsonResponse({"ok": True})`,
  under a gunicorn of its own started with Relay's configuration (`relay/gunicorn_conf.py`, the same
  HTTP_WORKERS) and Relay's settings but for the URLconf (`bench/plain_settings.py`: same
  middleware, database and logging). It is the framework's ceiling under the server Relay ships: the
  baseline of http_me's figures, of embedded_me and of a single login; http_history shows it as a
  row of its own. gunicorn's threaded workers keep connections alive between requests (2 s), for
  Relay and the plain view alike (before issue 29, sync workers closed each one, so wrk reconnected
  per request).
- **http_me**: saturation is wrk closed loop; "half load" paces wrk at half the saturated rate with
  a Lua `delay()` of connections/rate per request. That is not a perfect open loop (a slow
  response delays its own connection's next request, so tails are under- rather than
  over-stated); the achieved rate is in the note. The baseline runs the plain Django view at
  the same rate and connections.
- **round_trips**: counts, not timings, in the harness process against the bench's PostgreSQL
  and Redis: a batch of 1, 10 and 100 submits through `realtime.services.calls_submit`
  (as the socket server's batcher calls it, the bench's WebSocket users, rolled back after)
  and `GET /api/user/me` through Django's test client. Database round trips are the
  statements Django's instrumentation captures (the transaction's two included); Redis round
  trips are redis-py's sends (harness/roundtrips.py), a pipeline being one.
- **http_history**: one wrk connection, closed loop, so each request is timed alone. Three pages per
  filter: the first, a deep `offset`, and the `before` cursor a client holds after paging to
  that same depth (found once, outside the timing). Baseline: the statements `history_page`
  runs (the sum of the owner's counters for `total`, then the page and the row past it with
  their number join; past an offset, their positions first and then the page's rows),
  compiled from the same querysets and run on psycopg in the harness process. The plain
  view's row is one wrk connection too: the framework's floor for the same closed loop.
- **http_logins**: login with the real Argon2 hash; every login also opens a session row. Hashing is
  capped host-wide (`PASSWORD_HASH_CONCURRENCY`) and, since issue 29, a login that finds
  the slot busy waits its turn in the hashing queue (core/passwords.py) up to
  `PASSWORD_HASH_WAIT_SECONDS` (2 s); it is refused 503 at once only when the queue already
  holds what fits in that wait or `PASSWORD_HASH_QUEUE_MAX` (default every HTTP thread but
  one per worker; before threaded workers, the workers less one, 3 here). "One at a time" is
  one wrk connection, closed loop, so no login waits for
  the slot. The other figures come from `bench/burst.py`, a client process of its own:
  every request on a connection of its own, the connections opened first (the kernel
  completes them in the listen backlog), then every request written in one pass of its
  event loop (the notes say within how many ms), each timed from its write to the end of
  its response, so the wait in the listen backlog for a free worker is in it.
  **Logins at once**: that many distinct users (sharing one hash at the hasher's
  parameters, so no login re-hashes), one login each, in bursts half a second apart; the
  target's hash-time is the Argon2 row's median, measured in the harness process before
  them. The note has the spacing of the answers ((slowest - fastest) / (n - 1): what a
  login costs in the queue) and the queue's own average slot hold, read from its state file
  after them. **Number creations at once**: a new user on the free plan (5 numbers) sends 6
  `POST /api/numbers` at once, each with a CAPTCHA token of its own, issued and answered
  through the captcha service in the harness (not over HTTP, whose per-IP limits are
  Relay's defaults), against an inventory stocked with `manage.py provision_numbers`; each
  creation hashes its PIN in the queue. **Flood**: that many distinct users' logins at
  once, one burst; beside it `GET /api/user/me` (JWT) is probed open loop at a fixed rate,
  a new connection per tick, each timed from its tick, from a second before the burst to a
  second after its last answer. The /me figures are the probes whose tick fell between the
  burst's first write and its last answer; their baseline is the same probe alone just
  before, for the profile's HTTP seconds. "p99 of every answer" is the logins' own; its
  target is the queue's promise (docs/operations.md): a login is served within
  `PASSWORD_HASH_WAIT_SECONDS` or refused at once. Server CPU of the flood rows spans the
  probe's second before and after. Load-gen CPU is burst.py's.
- **embedded_me**: the embedded default as `make run` starts it: a RELAY_VAR_DIR of its own with a
  generated `secret_key` file, `manage.py migrate`, then `manage.py runrelay --no-worker`
  with no DATABASE_URL, REDIS_URL or SECRET_KEY: SQLite (WAL) under that directory,
  the embedded Redis on a unix socket, every other setting Relay's default (rate limits,
  HTTP_WORKERS, LOG_LEVEL=INFO: the access log is on, written to a file). `collectstatic`, the
  number stock and the task worker are left out: /me uses none of them (an idle worker polls
  its queue every 0.2 s; starting one costs CI's smoke run seconds). A user registers through
  POST /api/auth/register; wrk saturates GET /api/user/me with its JWT, as http_me. Baseline: the
  plain Django view under a gunicorn with the same environment.
- **ws_idle**: client processes of asyncio `websockets` clients (no client pings) open sockets in
  steps against runrelay's Daphne (`relay.platform.daphne_server` with runrelay's arguments) and
  against a bare Daphne; RSS per socket is (the Daphne processes' RSS now - before the first socket)
  / sockets open; idle CPU is measured over a quiet window. Relay's sockets are authenticated (JWT)
  and have joined their user and session groups in Redis; 1,000 users hold the 10,000 sockets.
- **ws_ping**: open loop: pings are scheduled at a fixed total rate round-robin over the sockets
  and timed from their scheduled send time to their pong, so queueing shows in the tail.
  "Saturation" keeps one ping in flight per socket.
- **ws_call_acks**: one user per socket, so each call's events reach only its own socket. Sustained
  acks/s keeps a fixed number of calls in flight per socket; latency is open loop at half that
  rate, against ws_ping's ping p99 at 1,000 msg/s (the target is that p99 + 5 ms). The **burst**
  opens its sockets first (one user each), then every socket sends its calls back to back,
  all sockets at once, from the client processes; it runs from the first send to the last
  `call_ack` (wall clock, one machine), and each ack is timed from its own call's send.
  Afterwards every acked callId is looked up in the database. The notes' **mean batch** is
  how many call frames Relay wrote per transaction during that run: the change in
  `relay_call_submit_batch_size`'s `_sum` over the change in its `_count`, read from
  `/metrics` (the bench sets `METRICS_TOKEN`) just before and after it.
- **ws_call_acks_embedded**: ws_call_acks's code on the embedded default, started as embedded_me
  starts it (a RELAY_VAR_DIR of its own with `make run`'s secret and metrics token files, SQLite,
  the embedded Redis, Relay's other defaults, LOG_LEVEL=INFO included) but for the per-user call
  rate limit and the free plan's call quotas, raised as in the rest of the bench: 100 calls a user
  with no worker to end them would otherwise measure refusals. Its users and their JWTs are made in
  its SQLite database by a child process with its environment, which also looks the acked callIds up
  there. The p99's reference is ws_ping's, on the PostgreSQL Relay (a ping touches no database).
- **ws_status_push**: the worker places short simulated calls (steps of 50 ms); each `call_status`
  frame is timed from its `ts` (the `updated_at` written in the committing transaction, whole
  milliseconds, so up to 1 ms high) to its arrival. Baseline: frames pushed with `group_send` to the
  same sockets from another process, timed from just before the send.
- **sip_50_calls**: real calls over SIP. SIPp (`-sn uas -rtp_echo`) answers every INVITE and echoes
  the audio; two `telephony_agent` processes (TELEPHONY_PROVIDER=sip, their own TTS cache, no
  relay_worker running) claim the calls that one WebSocket client process submits as `call` frames.
  A few short unmeasured calls warm the agents up first. **Concurrency**: all calls at once, each
  with its own text (a TTS miss); the peak is the most calls between their `answered_at` and
  `ended_at` in the database at one instant (the note has what polling every 0.2 s saw). A call is
  lost unless it ended `completed` and SIPp received an INVITE with the Call-ID the agent recorded
  when it claimed it; the note says how many distinct INVITE Call-IDs SIPp saw and how much echoed
  speech the agents logged. **Server CPU** in sip_50_calls is the agents' (psutil, the espeak-ng and
  sox runs they reaped included) per wall second: CPU per call is over the whole run; "while N are
  up" between the first and last 0.2 s sample with the most calls in progress. Load-gen CPU is
  SIPp's and the WebSocket client's over the whole run. RSS per call is (the agents' summed RSS at
  its highest sample - just before the submit) / the peak. **call_ack to INVITE** runs from the
  client's wall clock at the `call_ack` to SIPp's stamp of that Call-ID's first INVITE (one machine,
  one clock); it can be negative, as the agent may claim a call before its ack reaches the client.
  Misses are texts no call has used, hits the same texts again, submitted a few at a time (each
  batch once the last one rang) so claiming is not queue-bound; the target is read on p95 (with 10
  calls a round, nearest-rank p95 is the slowest call). **Speech.render** is timed in the harness
  process on a cache directory of its own: a new text, the same again (memory), and the same on a
  new Speech over that directory (file, as another agent sees it).
- **sip_tls_srtp_cpu** (issue 26): one `telephony_agent` (`SIP_AGENTS=1`, room for every
  call) takes the same number of calls at once with one message for all of them, whose
  speech an unmeasured warm-up call renders first, so no call pays espeak-ng. The baseline
  runs them over plain UDP straight to SIPp; the other leg over TLS (`SIP_TRANSPORT=tls`,
  `sips:` trunk, `SIP_TLS_CA_FILE`) with `SIP_SRTP=required`. SIPp 3.6 has no TLS, so
  Kamailio 5.6 (`bench/kamailio.py`) terminates it: Relay --TLS--> Kamailio --UDP--> SIPp, a
  stateful proxy on loopback that record-routes, so the ACK and BYE go through it too; its
  certificate is for 127.0.0.1, from a CA made for the run, and the agent verifies it. Both
  legs run the same SIPp scenario (`bench/sipp/answer.xml`: 180, 200 with PCMU, Relay's BYE)
  with `-rtp_echo`, so each call carries audio both ways. Over SRTP SIPp answers RTP/SAVP
  with an `a=crypto` line holding the key Relay offered: SIPp decrypts nothing, it sends
  Relay's packets back as they came, and since the answer's key is Relay's own, Relay's
  libsrtp authenticates and decrypts each echoed packet as it would a real far end's audio
  (the note's "heard their echoed speech" proves it did). Echo on both legs keeps the
  baseline comparable: the UDP agent reads every echoed packet too. (Echoing with a random
  key instead would make Relay drop each packet after a failed HMAC, a cost no real call has;
  no echo at all would leave out the receiving half of a call.) Legs alternate UDP, TLS, TLS,
  UDP so that the shared machine's drift falls on both. CPU per call is the agent's (psutil,
  its reaped espeak-ng and sox included) from the submit until the last call ended, over the
  calls; Kamailio's CPU (its main process and forked workers) is reported on a row of its own
  and is in no agent figure. Load-gen CPU is SIPp's and the WebSocket client's.
- **sip_200_calls** (issue 26): the same machinery, one agent with `SIP_MAX_CONCURRENT_CALLS` equal
  to the calls, all submitted at once over 10 sockets, with a message of about 14 s so the last
  answered overlaps the first; over plain UDP, then over TLS + SRTP through Kamailio. "Completed"
  counts calls that ended `completed` and whose INVITE SIPp received; "up at once" is the most calls
  between their `answered_at` and `ended_at` in the database (the note has what 0.2 s polling saw,
  and how long after the submit the last call was answered). The agent's CPU is read between the
  first and the last sample with the most calls in progress, as in sip_50_calls; RSS per call is
  (peak - idle) / the peak. **Steady audio** (issue 29, sip_50_calls), on the UDP leg: SIPp's answer
  names `bench/rtpmeter.py far-end` as its media instead of SIPp's own port, one socket that sends
  every packet back to where it came from, as `-rtp_echo` would (so the agent still reads its audio
  back), and takes each packet's kernel receive stamp (`SO_TIMESTAMPNS`; on loopback, the agent's
  `sendto`). A stream (source port and SSRC) is matched to its call by the RTP port of the agent's
  INVITE. **Call duration off its message** is, per call, the absolute difference between SIPp's
  first 200 OK to the INVITE and its receipt of the agent's BYE (SIPp's stamps in its message log)
  and the message as the agent plays it (its speech from the agent's own TTS cache, in whole 20 ms
  frames): the call as the callee had it, silence before the first packet and the wait for the
  hang-up included. The note has the meter's audio span (first packet to last + 20 ms) against the
  message, the first packet's delay after the 200 OK, and the database's `answered_at` to `ended_at`
  (written by the agent's database thread, late under load). **RTP send jitter** is, per packet, the
  absolute difference between its stamp and its stream's ideal schedule, the first packet's stamp
  plus 20 ms per sequence number since: nearest-rank percentiles over every packet of every call,
  set-up and hang-ups included. The baseline of both is the same meter on one call alone, on an
  agent of its own with the same message (and its own warm-up call), run just before the 200.
- **sip_forward_cpu** (issue 28): a number of a bench user of its own forwards to one
  E.164 target (no screening). One `telephony_agent` (`SIP_AGENTS=1`,
  `SIP_MAX_CONCURRENT_CALLS` twice the calls: a forwarded call holds two places) is between
  two SIPps: one places the calls to the number within a second (`bench/sipp/
  forward_caller.xml`), the other is the trunk and the target's phone
  (`bench/sipp/forward_target.xml`: 180, then 200 after 300 ms); the agent dials the target,
  and once it answered, answers the caller and relays RTP both ways. Each caller says the
  very message the baseline's calls play (espeak-ng's A-law of the same text, written by the
  bench as a capture of 20 ms RTP packets for SIPp's `play_pcap_audio`; SIPp's own
  g711a.pcap has 30 ms ones) and hangs up when it ends; the target (`-rtp_echo`) echoes what
  it hears. So the message crosses the agent both ways: a bridged call has the agent receive
  and send twice the packets of a played-message call, and transcode each (the caller offers
  PCMA, the target answers PCMU). The baseline is sip_tls_srtp_cpu's plain UDP leg, same
  calls and message: the agent plays it to SIPp, which echoes it. Each leg has an agent of its
  own and an unmeasured warm-up call; legs alternate played, bridged, bridged, played. CPU per
  call is the agent's (psutil) from the submit, or the callers' start, until every call ended
  (recorded, for a bridged one), over the calls; load-gen CPU is SIPp's, both SIPps' for the
  bridged legs. A bridged call counts when the agent recorded it `answered` by the target
  (`answered_by` forward); the packets relayed each way are from the agent's log line of each
  bridge.
- **sip_forward_100** (issue 28): the same agent and SIPps (`SIP_MAX_CONCURRENT_CALLS=250`),
  all calls placed within a second and each held 20 s, but no SIPp sends or echoes media:
  `bench/rtpmeter.py`, one process, is both ends' media, a UDP socket for every caller (their
  SDP) and one for every target (their 200 OK), both answering PCMA so that payloads cross the
  agent unchanged. It tails the caller SIPp's message log for the agent's 200 OK to each
  caller, and from then on sends that leg's agent port 20 ms RTP packets whose payload tags
  the leg, a sequence number and the wall clock read just before the `sendto`; the agent
  relays each to the target's socket, which thereby learns the agent's port of the target's
  leg and starts sending its own packets the other way, until the same end (18.5 s after the
  caller's first; each leg at a random phase of 20 ms). Each packet is timed to the kernel's
  receive stamp (`SO_TIMESTAMPNS`), which on loopback is taken when the sender's `sendto`
  hands the datagram over, not when the meter's loop reads it: so the delay runs from the
  meter's clock reading to the agent's `sendto` of the relayed packet, and holds the meter's
  own `sendto` (the floor below), the wait in the agent's socket until its event loop reads
  the packet, and the relay: one pass through the agent, not a round trip, and no SIPp echo
  in it. The p50 row's note has the instrument's floor: the same meter with as many flows
  each way sent socket to socket for 5 s, no agent. Percentiles are nearest-rank over every
  packet of both directions, set-up and hang-ups included; the p99 row's note splits them at
  the last bridge and the first hang-up (the database's times). "Bridged and completed"
  counts calls the agent recorded `answered` by the target; "up at once" is the most legs
  between their bridge (`answered_at`) and `ended_at` at one instant; packets not relayed are
  those sent minus those received, each way, and a packet that arrives from another bridge's
  port would be counted as crossed. The agent's CPU while all are up and RSS per call are read
  as in sip_200_calls; load-gen CPU is the meter's and both SIPps'.
- **sip_browser_50** (issue 43): calls from the browser. `bench/browser_load.py`, one process,
  is 50 aiortc tabs of one user on one socket to a Daphne of Relay's with the agents' settings
  (`TELEPHONY_PROVIDER=sip`); each tab offers PCMU alone and sends `rtc_offer`; one agent
  (`SIP_AGENTS=1`) answers each offer (ICE, DTLS-SRTP), dials SIPp (`bench/sipp/
  forward_target.xml`, PCMU, 300 ms of ringing, `-rtp_echo`), and bridges the tab to the call.
  From its call's answer each tab talks for 10 s (the tabs are placed together, so the calls
  overlap, as the baseline's do): a 20 ms packet every 20 ms, paced by the clock, whose
  payload tags the tab and the packet; SIPp echoes it, and the tab
  times its round trip (tab -> agent -> SIPp -> agent -> tab: two passes through the agent,
  the tabs' own SRTP in one Python process, and SIPp's echo), so one pass is at most the round
  trip. A packet never heard back is lost. Then each tab closes its connection (the hang-up).
  The baseline, in the same run, is as many forwarded calls bridged SIP to SIP on a fresh agent
  (as sip_forward_cpu's, both ends SIPp, the target echoing), the callers talking the same
  10 s of 20 ms packets. Agent CPU per call is its CPU from the first offer (the first
  caller) to the last call's end, over the calls.
- **sip_ring_group** (issue 57): calls at once to a ring group, on one agent
  (`SIP_AGENTS=1`, 6 places a call). The number's ring list rings `all` at once, 30 s each:
  three phone entries (+44 113 496 0991, 0992, 0993) dialled through the trunk, which is one
  SIPp (`bench/sipp/ring_target.xml`, PCMU, 300 ms of ringing, `-rtp_echo`), then the owner
  as a member entry: one console tab (`bench/ring_tab.py`, aiortc, its own process) with
  Phone on, on a Daphne of Relay's with the agents' settings, and no ring phone. SIPp places
  the calls within a second (`forward_caller.xml`, its caller read from an injection file),
  their callers' last digits going round 1, 2, 3, 4: phone n answers a call whose caller ends
  in n (a regexp over the INVITE: Request-URI and From end in the same digit) and rings on
  any other until the agent CANCELs it; the tab answers, as the console does (`rtc_offer`
  naming the ring, ICE, DTLS-SRTP), the callers ending in 4, which no phone answers, and
  echoes what it hears; any other ring it lets ring until `rtc_hangup`. So of the full run's
  50 calls phones 1 and 2 take 13 each, phone 3 and the tab 12 each (the smoke run's 4: one
  each).
  Each caller says 10 s of A-law silence in 20 ms packets from its answer and hangs up. A call
  is answered by one entry when it is recorded answered with exactly one leg answered (the
  note says how many by the entry the caller names); the other entries are the phone legs
  not answered, each of which must have reached SIPp as a CANCEL carrying `Reason:
  SIP;cause=200;text="Call completed elsewhere"` (read back from SIPp's message log by the
  leg's Call-ID), and the tab's ring on each call it did not take, which must end with
  `rtc_hangup` `answered_elsewhere`. The baseline, in the same run, is as many calls to a
  number forwarding to one phone (SIPp, PCMU, echoing) on a fresh agent, the callers saying
  the same talk; the full run has two batches of each, alternated (forwarded, ring group,
  ring group, forwarded), so that the machine's drift weighs on both alike. A last batch,
  after them, is the same ring group with the
  callers' digits going round 1, 2, 3 only: the phones take every call and the tab rings on
  each and takes none, which sets what ringing the list costs apart from what a
  browser-bridged call's media costs (issue 43: about 1.5x a SIP bridge). Agent CPU per call
  is its CPU from the first caller to the last call's record, over the calls; a warm-up call
  (phone 1's) comes before each batch, on its fresh agent, and is not counted. Load-gen CPU
  is both SIPps' and the tab's.
- **sip_recorded** (issue 58): recorded bridged calls at once on one agent (`SIP_AGENTS=1`,
  2 places a call): the number forwarding to one phone (+44 113 496 0990, its ring list's one
  entry, as sip_forward_cpu's; SIPp on the trunk, PCMU, 300 ms of ringing, `-rtp_echo`) with
  recording on. SIPp places the calls within a second (`forward_caller.xml`), each caller
  talking 10 s of A-law in 20 ms packets from its answer; both parties first hear the
  announcement ("This call may be recorded.", about 1.7 s, from the speech cache), then the
  bridge is recorded, one stereo WAV a call. The baseline, alternated with it in the same
  run, is the same number with recording off on a fresh agent, the callers saying the same
  talk: its bridges are the announcement's length longer. Agent CPU per call is the agent's
  CPU (and its espeak-ng and sox) from the callers' start to the last call's end, over the
  calls. Each recording is read back: its WAV's frames (from its header) against the
  bridge's length the agent logged with it.
- **sip_transfer** (issue 58): blind transfers on one agent (`SIP_AGENTS=1`, 3 places a
  call). SIPp places the calls at a steady rate (10 a second in the full run, `-r`;
  `forward_caller.xml`, no audio, hanging up 4 s after its answer) to the number forwarding
  to one phone (+44 113 496 0990, sip_forward_cpu's). The trunk is one SIPp running the
  transfer tests' own scenario (`harness/sipp/transfer_phones.xml`): the phone rings 300 ms,
  answers, and 1 s after its ACK sends REFER in that dialog, its `Refer-To` a `tel:` URI of
  the target (+44 113 496 0994), takes the 202, the NOTIFYs ("100 Trying", then "200 OK")
  and the agent's BYE; the target rings 300 ms, answers and plays SIPp's capture until the
  caller hangs up. **The REFER to the target's first ring** is, per call, from the moment the
  trunk SIPp sent the phone's REFER (its first transmission) to the moment the same SIPp
  received the agent's INVITE to the target, which is when the target starts ringing (it
  sends its 180 at once): both read from that one SIPp's message log, so one process's
  clock. The two are paired through the ledger: the call's phone leg's Call-ID and its
  transfer leg's. It holds what the agent does in between: the 202, the policy and quota
  check as the owner, the NOTIFY "100 Trying", the unbridge, the transfer leg written, and
  the INVITE sent. p95 over the calls (the note has p50 and the worst). A call counts as
  lost unless it is recorded answered with its transfer leg answered. A warm-up call (a
  whole transfer) comes first and is not counted.
- **sip_edge_400** and **sip_edge_rolling** (issue 42): calls from the trunk through the shipped
  SIP edge, `deploy/kamailio/relay-edge.cfg` as it is with its default probe interval (5 s)
  and timeout (2 s), to two telephony agents. One SIPp is every caller (`edge_caller.xml`: it
  follows the edge's Record-Route); a number of its own answers by voicemail after a second
  of ringing and a one-word greeting; each caller waits 3 s, speaks SIPp's g711a.pcap and
  hangs up. A call counts as kept when it was answered and its message recorded to within a
  second of what the caller said; SIPp's exit status says whether every one of its calls
  ran its scenario to the end (an agent's BYE or a refused INVITE fails it). sip_edge_400
  places every call at 100 a second; "up at once" is the most calls between their answer
  (the inbound `Call.answered_at`) and their end (the record's start plus its duration); the
  edge's CPU is Kamailio's processes' (psutil), over the run, per call. sip_edge_rolling
  places calls at a steady rate (SIPp `-r 50 -rp 60000`); once the first calls are up,
  agent 0 is sent SIGTERM (it drains), started again once it has exited, and (once the
  edge's probe can have found it, an interval and a timeout later, and has taken it back
  if it had taken it out) agent 1 the same; the calls run on until SIPp has placed them all.
- **transcribe_rtf** (issues 44 and 56): the voicemail transcript's cost and accuracy. Each
  engine (Whisper, the default, then pocketsphinx, the fallback) runs in a spawned child
  process of its own, as the worker runs it. In it the model is loaded first (its own row,
  wall time, with its CPU in the note), one unmeasured message warms it up, then messages of
  espeak-ng speech as a call's voicemail is stored (sox to 8 kHz A-law, then
  `recording_save`'s WAV), 4 to 9 s each, are transcribed one after the other; the figure is
  the CPU they took (`time.process_time`, the child's own, whatever else the machine runs)
  over the seconds of speech they hold. Then the accuracy test's ten sentences (two at smoke
  scale), the same audio for both engines, give each one's word error rate, and the child's
  peak RSS (`ru_maxrss`) is reported.
- **machine_detection** (issue 56): the answering-machine detector over the accuracy test's 35
  answers (harness/answers.py: greetings with and without a beep, people's "Hello?", fax tones,
  silence, noise and tones, through mu-law with line noise, made repeatably), each fed to a
  detector 20 ms at a time as a call's audio is: the share right, machines taken for a
  person, the time to a decision (p95 over the answers that can be told apart; the note has
  it over all), and the CPU per second of audio, in the harness process on one core.
- **voicemail_mail** (issue 44): how soon a voicemail's mail leaves. A `relay_worker` (as
  production runs it, polling its queue every 0.2 s) mails through an SMTP server in the
  harness (aiosmtpd on loopback); the harness stores an espeak-ng message and records its
  call (`record_inbound_call`, as the agent does), one message at a time, and times each from
  the record's commit to its mail's arrival. Once with `TRANSCRIBE_ENGINE=off` (the mail is
  queued with the record), once with Whisper (the mail waits for the transcript, made
  in the worker's child process; the note gives the transcription's own time, from the
  worker's log). The first message of each worker warms it up and is not counted.
- **sip_speech_gather** (issue 56): speech gathers on one agent (20 at once in the full run),
  each a script of one `gather` with `input: ["speech"]` and a speechTimeout of 1 s, its
  actionHook a plain HTTP server in the harness that notes each request's arrival (wall
  clock) by `callId`. SIPp answers, waits a random 0-8 s (the callers stop talking at
  different moments, as on real lines; all 20 gathers are open at once), plays a 3 s
  espeak-ng sentence in A-law followed by silence, and writes the SIP Call-ID with the wall
  clock when the sentence's last voice has left (the last voice frame Relay's own detector,
  telephony.vad, finds in that audio). The figure: hook arrival less that moment,
  matched through the Call-ID the agent stored with each call, less the speechTimeout (the
  1 s of silence the app asks for to end an utterance, the least a gather takes: what is
  judged is what Relay adds once the utterance is over), p95; the note has the whole delay
  too. A warm-up call first loads the model into the agent's transcribing child.
"""
