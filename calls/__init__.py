"""The call ledger (issue 54): one model of a call, its legs and its numbered events. Its first
part is the states a call moves through and the one table of the moves between them
(calls.states); the models move here from realtime, telephony and history next."""
