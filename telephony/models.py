# The telephony app keeps no rows of its own: an inbound call, its legs and its events are the
# call ledger's (calls.Call, calls.Leg, calls.CallEvent).
