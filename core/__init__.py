"""The kernel: what every app builds on, importing no app.

Errors and their code registry, the JSON and text rules every body and frame passes
(parsing), input fields and patterns, pagination, rate limits, password hashing and its
per-process cap, phone numbers, client addresses, OpenAPI helpers, the ViewSet base and
router, admin links, the one helper through which events leave for sockets after commit,
and the database idiom every app shares (db: a create a concurrent request may have taken).
Nothing here knows a model.
"""
