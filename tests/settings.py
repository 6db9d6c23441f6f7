"""Settings of the test run: Relay's own, minus the lookup of a running embedded Redis.

A developer may have `make run` up while the suite runs; the suite must not push its events
into that Relay's Redis. Without REDIS_URL it uses the in-process cache and channel layer;
with it (CI's second pass), that Redis.
"""

import tempfile

from relay.settings import *  # noqa: F403
from relay.settings.database import redis_settings
from relay.settings.readers import text

REDIS_URL = text("REDIS_URL")
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
