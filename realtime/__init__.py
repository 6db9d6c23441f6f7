"""Realtime: outbound calls and the WebSocket.

Owns Call, its CallEvents and its per-(owner, status) counters (`total` of the
list), the socket consumer and its middleware, the telephony providers, and the call
pipeline: `services` (submit, cancel, the telephony agent's claim and heartbeat, the
counters' recount), `selectors` (reads), `pipeline` (the state machine, the counters' moves
and the recovery deadline) and `tasks` (the only module that knows the task queue, and
recovery). Endpoints: /ws and /api/calls*.
"""
