"""Settings of the test run: Relay's own, minus the lookup of a running embedded Redis.

A developer may have `make run` up while the suite runs; the suite must not push its events
into that Relay's Redis. Without REDIS_URL it uses the in-process cache and channel layer;
with it (CI's second pass), that Redis.
"""

from relay.settings import *  # noqa: F403
from relay.settings import env, redis_settings

REDIS_URL = env.str("REDIS_URL", default="")
CACHES, CHANNEL_LAYERS = redis_settings(REDIS_URL)
