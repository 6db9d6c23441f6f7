"""Matrix: a bot account of the service tells users about their calls in a direct room, and
takes call requests from that room (docs/matrix.md).

Consent first: the bot invites the user's Matrix id into a direct room and sends nothing
until they join. Every message it sends is an outbox row (MatrixMessage) written in the
transaction of the state it reports, sent by the worker with a transaction id derived from
the row, so a retry never posts twice. The bot reads its rooms with /sync long-polling in
`manage.py matrix_bot`, never in a web or socket server.
"""
