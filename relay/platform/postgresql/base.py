"""Django's PostgreSQL backend, with a health check that is not paid by every request.

With `CONN_HEALTH_CHECKS`, Django pings a kept connection (`SELECT 1`, on the raw psycopg
connection, past its query instrumentation) the first time each request or each
`database_sync_to_async` call uses it: a second round trip on every `GET /api/user/me`, whose
own work is one, and on every batch of call submits. Here a connection that a request (or a
batch) used without a database error less than `DATABASE_HEALTH_CHECK_FRESH` seconds ago
is taken as alive, as the ping would have found it: under load the ping is never paid, and
a connection idle for longer is pinged as before. What is given up: after a database restart,
the first request on a connection used within that second fails (`database_unavailable`,
503; a call frame gets its error frame, nothing written) where the ping would have
reconnected it; Django then closes the connection and the next request opens a new one.
docs/decisions.md, "The health check, not paid by every request".

And a cursor whose statements are prepared (`prepared_cursor`), for the statements that
`core.platform.compiled` runs on every request and every batch: PostgreSQL parses and plans such a
statement once per connection, not on every call (the session behind a JWT with the user's
quotas: 0.5 ms of planning for 0.2 ms of execution). Django binds every other statement on
the client, and nothing else is prepared. `DATABASE_PREPARED_STATEMENTS=false` turns it off
(a pooler that does not keep a session's prepared statements; docs/operations.md), and
`DATABASE_PREPARED_STATEMENTS=psycopg` leaves it to psycopg, which then binds every statement
on the server and prepares each on its DATABASE_PREPARE_THRESHOLD-th run (relay/settings).
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.db.backends.postgresql import base, operations
from psycopg import errors

# psycopg prepares a statement only when asked (prepare=True) below this many executions of
# it: Django's own cursors bind on the client and never prepare, whatever the threshold.
_ONLY_WHEN_ASKED = 2**31


class PreparedCursor(base.ServerBindingCursor):
    """Parameters bound on the server, and each statement prepared on its first run on the
    connection (psycopg keeps the last `prepared_max` of them, 100, and deallocates older)."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor, sql, params):
        # psycopg keeps no client-side text of a prepared run: the statement with its values,
        # as Django shows its own (debug logs, captured queries).
        if isinstance(cursor, PreparedCursor):
            try:
                return self.compose_sql(sql, params)
            except errors.DataError:
                return sql
        return super().last_executed_query(cursor, sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    _good_at = -math.inf  # when a request last ended on this connection without an error
    _prepare_next = False  # create_cursor: the cursor asked for is prepared_cursor's

    def prepared_cursor(self):
        """A cursor (wrapped as Django wraps its own, so counted and logged as they are) whose
        statements are prepared on the connection; a plain cursor with
        DATABASE_PREPARED_STATEMENTS off, or `psycopg` (psycopg prepares every statement
        itself on its DATABASE_PREPARE_THRESHOLD-th run)."""
        if getattr(settings, "DATABASE_PREPARED_STATEMENTS", False) is not True:
            return self.cursor()
        self._prepare_next = True
        try:
            return self.cursor()
        finally:
            self._prepare_next = False

    def create_cursor(self, name=None):
        if name is not None or not self._prepare_next:
            return super().create_cursor(name)
        raw = self.connection
        if raw.prepare_threshold is None:  # Django's setting: nothing is ever prepared
            raw.prepare_threshold = _ONLY_WHEN_ASKED
        factory, raw.cursor_factory = raw.cursor_factory, PreparedCursor
        try:
            return super().create_cursor(name)
        finally:
            raw.cursor_factory = factory

    def close_if_unusable_or_obsolete(self):
        # Called as a request starts and as it ends (close_old_connections): one that used
        # the connection (its check done, pinged or not) without a database error leaves it
        # proven alive.
        if self.connection is not None and self.health_check_done and not self.errors_occurred:
            self._good_at = time.monotonic()
        super().close_if_unusable_or_obsolete()

    def close_if_health_check_failed(self):
        fresh = getattr(settings, "DATABASE_HEALTH_CHECK_FRESH", 0)
        if (
            self.connection is not None
            and self.health_check_enabled
            and not self.health_check_done
            and time.monotonic() - self._good_at < fresh
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def close(self):
        self._good_at = -math.inf
        super().close()
