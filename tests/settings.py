"""Settings of the test run: Relay's own, minus the lookup of a running embedded Redis.

A developer may have `make run` up while the suite runs; the suite must not push its events
into that Relay's Redis. Without REDIS_URL it uses the in-process cache and channel layer;
with it (CI's second pass), that Redis.

Under pytest-xdist every worker is a separate run: its own test database (pytest-django adds
the worker's suffix to the name) and its own Redis database, so one worker's `cache.clear()`
or a group named after a user id never reaches another's. The worker's URL goes back into the
environment, which the live-server tests' child processes inherit (harness/live.py).
"""

import os
import tempfile
from urllib.parse import urlsplit, urlunsplit

from relay.settings import *  # noqa: F403
from relay.settings.database import redis_settings
from relay.settings.readers import text


def worker_redis_url(url: str, worker: str) -> str:
    """`url` with its database number moved up by the xdist worker's index ("gw2": +2), so
    the workers of one run use neighbouring Redis databases; `url` itself outside xdist."""
    if not url or not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    database = parts.path.strip("/")
    number = int(database) if database.isdigit() else 0
    return urlunsplit(parts._replace(path=f"/{(number + int(worker[2:])) % 16}"))


# Django's test client names its host `testserver`; Relay's own settings no longer serve it.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]  # noqa: F405

REDIS_URL = worker_redis_url(text("REDIS_URL"), os.environ.get("PYTEST_XDIST_WORKER", ""))
if REDIS_URL:
    os.environ["REDIS_URL"] = REDIS_URL
CACHES, CHANNEL_LAYERS = redis_settings(REDIS_URL)

# In-process tests close each thread's connection after its work, as a server would after
# CONN_MAX_AGE: the WebSocket consumer's submit threads outlive a test, and a connection they
# kept would stop the test database from being flushed or dropped. The live-server tests run
# Relay's own settings, connections kept.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405

# Voicemail recordings of the run go to a temporary directory of its own, never to var/.
STORAGES["recordings"]["OPTIONS"] = {  # noqa: F405
    "location": tempfile.mkdtemp(prefix="relay-test-recordings-")
}

# Voicemail is transcribed only where a test is about transcripts (it sets TRANSCRIBE_ENGINE,
# in-process or in a live server's environment): otherwise Whisper would decode every
# message the suite leaves (fifty at once in one test), in the live servers' workers too,
# taking the CPU of every test beside them. The README's tests run `make run` as printed,
# transcription on.
TRANSCRIBE_ENGINE = "off"
os.environ["TRANSCRIBE_ENGINE"] = "off"

# The admin's pages are tested signed in as staff without a second factor (tests.conftest's
# staff_client, the admin's browser tests); Relay's default outside DEBUG keeps such staff
# out. The tests of that rule turn it on for themselves (tests/admin/test_sign_in.py;
# docs/decisions.md, issue 53).
REQUIRE_STAFF_2FA = False
