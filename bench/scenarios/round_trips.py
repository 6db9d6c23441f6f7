"""round_trips: what an ack and a /me cost in round trips, counted, not timed (issue 40).

In this process, against the bench's PostgreSQL and Redis: a batch of submits of the sizes
the socket server forms under load (realtime.services.calls_submit, as
realtime.consumers.SubmitBatcher calls it), and GET /api/user/me by JWT and by API key
through Django's test client. Statements are counted by Django's instrumentation
(CaptureQueriesContext: each one a round trip, the transaction's BEGIN and COMMIT
included), Redis round trips by redis-py's (harness/roundtrips.py: a pipeline is one). Each
batch runs in a transaction rolled back at its end, so nothing it writes stays for the
scenarios after it (its own transaction is then a savepoint: SAVEPOINT and RELEASE count
where BEGIN and COMMIT would).
"""

from __future__ import annotations

import secrets

from bench.report import Row
from bench.scenarios.common import Bench
from harness.roundtrips import count_redis

BATCH_SIZES = (1, 10, 100)
BATCH_TARGET = "<= 8 DB + BEGIN, COMMIT; <= 1 Redis, per batch"


class _Rollback(Exception):
    pass


def round_trips(b: Bench) -> None:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from accounts.models import User
    from realtime.services import calls_submit

    users = list(User.objects.filter(pk__in=[user_id for _, user_id in b.ws]))
    calls_submit(submits=[_submit(users[0])])  # connections open, queries compiled
    for size in BATCH_SIZES:
        submits = [_submit(users[n % len(users)]) for n in range(size)]
        try:
            with transaction.atomic():
                with CaptureQueriesContext(connection) as db, count_redis() as redis:
                    outcomes = calls_submit(submits=submits)
                raise _Rollback
        except _Rollback:
            pass
        created = sum(1 for outcome in outcomes if isinstance(outcome, tuple) and outcome[1])
        statements = len(db.captured_queries)
        met = statements <= 10 and redis.round_trips <= 1 and created == size
        note = (
            f"{redis.round_trips} Redis round trip(s) of {redis.commands} command(s); "
            f"{statements / size:.2f} DB and {redis.round_trips / size:.2f} Redis per ack; "
            f"{created} of {size} created, {len({s.user.pk for s in submits})} users"
        )
        b.add(Row("round_trips", f"a batch of {size} submits: DB round trips", statements,
                  "round trips", target=BATCH_TARGET, met=met, note=note))  # fmt: skip
    _me(b)


def _submit(user) -> object:
    from realtime.services import Submit

    data = {"type": "call", "callId": f"rt-{secrets.token_hex(8)}", "to": "+442079460120",
            "message": "Round trips."}  # fmt: skip
    return Submit(user=user, data=data, pushes=[])


def _me(b: Bench) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="localhost")
    for label, headers in (
        ("JWT", {"Authorization": f"Bearer {b.http_token}"}),
        ("API key", {"X-API-Key": b.api_key}),
    ):
        client.get("/api/user/me", headers=headers)  # warm: compiled queries, connections
        with CaptureQueriesContext(connection) as db, count_redis() as redis:
            response = client.get("/api/user/me", headers=headers)
        statements = len(db.captured_queries)
        note = f"HTTP {response.status_code}; {redis.round_trips} Redis round trip(s)"
        b.add(Row("round_trips", f"GET /api/user/me ({label}): DB round trips", statements,
                  "round trips", target="1 DB, 0 Redis",
                  met=statements <= 1 and redis.round_trips == 0 and response.status_code == 200,
                  note=note))  # fmt: skip
