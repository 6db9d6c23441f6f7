"""Realtime: outbound calls and the WebSocket.

Owns CallRequest and its CallEvents, the socket consumer and its middleware, the telephony
providers, and the call pipeline: `calls` (submit, cancel), `pipeline` (the state machine)
and `tasks` (the only module that knows the task queue, and recovery). Endpoints: /ws and
/api/calls*.
"""
