"""History: the call records of the users' numbers.

Owns CallRecord; `services.record_inbound_call` is the only writer (it applies the number's
blocklist and pushes `call_record` to the owner's sockets). Endpoint: /api/history.
"""
