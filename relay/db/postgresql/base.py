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
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    _good_at = -math.inf  # when a request last ended on this connection without an error

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
