"""History: the call records of the users' numbers.

Owns CallRecord and its per-(owner, number, status) counters (`total` of the list);
`services.record_inbound_call` is the only writer of both (it applies the number's blocklist
and pushes `call_record` to the owner's sockets). Endpoint: /api/history.
"""
