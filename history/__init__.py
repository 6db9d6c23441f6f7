"""History: the call records of the users' numbers, a read of the call ledger (history.records:
the inbound calls that ended, with their voicemail).

`services.inbound_call_ended` (the telephony agent's) and `services.record_inbound_call` (by
hand, or a tool) end a call in the ledger, keep its voicemail and count it (`total` of the
list, calls.OutcomeCounter) in one transaction, apply the number's blocklist and push
`call_record` to the owner's sockets. Endpoint: /api/history.
"""
