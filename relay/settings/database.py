"""Stores: the database, and Redis, which holds the cache (rate-limit counters) and carries the
channel layer (events between processes)."""

from redis.maint_notifications import MaintNotificationsConfig

from relay.settings.base import VAR_DIR
from relay.settings.readers import boolean, choice, database_config, text, whole_number

# --- Database -------------------------------------------------------------------------------
# The embedded default is the database that needs no DATABASE_URL: a SQLite file under var/.
_database_url = text("DATABASE_URL")
EMBEDDED_DATABASE = not _database_url
DATABASES = {
    "default": database_config(_database_url or f"sqlite:///{VAR_DIR / 'relay.sqlite3'}"),
}
_db = DATABASES["default"]
_sqlite_busy_timeout = whole_number(
    "SQLITE_BUSY_TIMEOUT", 30, minimum=0, maximum=3600, unit=" (seconds)"
)
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # Daphne, the task worker and management commands share one file: WAL lets readers run
    # beside the writer, IMMEDIATE takes the write lock up front (no deadlock on upgrade) and
    # the busy timeout makes a writer wait for the lock instead of failing "database is locked".
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": _sqlite_busy_timeout,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not :memory:, so live-server tests with several threads share one database.
    _db["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
# Every server keeps its connections: a gunicorn worker's thread across requests, Daphne on the
# thread Channels runs database calls on. Each request (and each database_sync_to_async
# call) first checks a kept connection is still alive, so a database restart costs one
# reconnect, and /healthz still sees a database that is down.
_db["CONN_MAX_AGE"] = whole_number(
    "DATABASE_CONN_MAX_AGE", 60, minimum=0, maximum=86400, unit=" (seconds)"
)
_db["CONN_HEALTH_CHECKS"] = True
# ...unless a request used it without a database error less than this many seconds ago
# (relay/platform/postgresql/base.py): under load the check's round trip is never paid. 0: every
# request checks.
DATABASE_HEALTH_CHECK_FRESH = whole_number(
    "DATABASE_HEALTH_CHECK_FRESH", 1, minimum=0, maximum=60, unit=" (seconds)"
)
if _db["ENGINE"] == "django.db.backends.postgresql":
    _db["ENGINE"] = "relay.platform.postgresql"
# PostgreSQL: the statements every request and every batch of submits runs
# (core.platform.compiled) are prepared once per connection, not parsed and planned on every
# run (true). `psycopg`: psycopg prepares by itself instead, every statement a connection has
# run DATABASE_PREPARE_THRESHOLD times, with its parameters bound on the server (Django's
# `server_side_binding`). Off (false): for a pooler that does not keep a session's prepared
# statements (PgBouncer in transaction mode before 1.21).
_prepared = choice(
    "DATABASE_PREPARED_STATEMENTS",
    "true",
    ("true", "false", "psycopg", "1", "0", "yes", "no", "on", "off"),
    lower=True,
    described="true, false or psycopg",
)
DATABASE_PREPARED_STATEMENTS = (
    "psycopg" if _prepared == "psycopg" else _prepared in ("true", "1", "yes", "on")
)
DATABASE_PREPARE_THRESHOLD = whole_number("DATABASE_PREPARE_THRESHOLD", 5, minimum=0, maximum=1000)
if DATABASE_PREPARED_STATEMENTS == "psycopg" and _db["ENGINE"] == "relay.platform.postgresql":
    _db.setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=DATABASE_PREPARE_THRESHOLD
    )
# The reads every request makes, compiled to SQL once per process through Django's SQL
# compiler internals (core/platform/compiled.py). Off: each runs as its queryset, through the ORM's
# public path (an upgrade of Django that changed those internals; tests/platform/edges.py).
COMPILED_QUERIES = boolean("COMPILED_QUERIES", True)
# Or a psycopg pool (Django 5.1+) of at most this many connections per process (PostgreSQL).
_pool_size = whole_number("DATABASE_POOL_SIZE", 0, minimum=0, maximum=1000)
if _db["ENGINE"] != "django.db.backends.sqlite3":
    DATABASE_POOL_SIZE = _pool_size
    if DATABASE_POOL_SIZE > 0:
        _db["CONN_MAX_AGE"] = 0  # Django refuses persistent connections together with a pool
        _db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": DATABASE_POOL_SIZE,
            "timeout": 10,
        }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: cache and channel layer --------------------------------------------------------
# Frames a socket may have waiting before the channel layer drops new ones for it (the
# layers' default, 100, is a burst of ~20 calls' events for a user with one busy socket).
CHANNEL_CAPACITY = whole_number("CHANNEL_CAPACITY", 5000, maximum=1_000_000)
# Every Redis operation on a request or socket path is bounded, so an unreachable or hung
# Redis answers the client (rate limits fail open, sockets close with 4503) instead of
# hanging it. Maintenance notifications stay off: redis-py 8 enables them by default on
# RESP3, and while they are on its pools hand out connections the server has already closed
# (after a Redis restart). relay/platform/channel_layer.py explains the channel layer's side.
REDIS_CONNECT_TIMEOUT = 1.0
CHANNEL_LAYER_OPERATION_TIMEOUT = 2.0
# One task per process pops every socket's messages, and a batch's pushes go in two round trips
# (relay/platform/channel_layer.py), through channels-redis's internals. Off: its own receive and
# group_send, the same messages at more memory and round trips (an off switch for an upgrade;
# tests/platform/edges.py).
CHANNEL_LAYER_FAST_PATHS = boolean("CHANNEL_LAYER_FAST_PATHS", True)
REDIS_CACHE_OPTIONS = {
    "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
    "socket_timeout": 1.0,
    "maint_notifications_config": MaintNotificationsConfig(enabled=False),
}


def redis_settings(url: str) -> tuple[dict, dict]:
    """CACHES and CHANNEL_LAYERS for a Redis URL; for "", the in-process equivalents."""
    if not url:
        return (
            {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
            {
                "default": {
                    "BACKEND": "channels.layers.InMemoryChannelLayer",
                    "CONFIG": {"capacity": CHANNEL_CAPACITY},
                }
            },
        )
    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "relay",
            "OPTIONS": REDIS_CACHE_OPTIONS,
        }
    }
    layers = {
        "default": {
            "BACKEND": "relay.platform.channel_layer.BoundedRedisChannelLayer",
            "CONFIG": {
                "hosts": [url],
                "prefix": "relay",
                "capacity": CHANNEL_CAPACITY,
                "operation_timeout": CHANNEL_LAYER_OPERATION_TIMEOUT,
                "connect_timeout": REDIS_CONNECT_TIMEOUT,
            },
        }
    }
    return caches, layers


REDIS_URL = text("REDIS_URL")
# Without REDIS_URL, `runrelay` starts an embedded Redis and writes its URL to this file while
# it runs, so that a management command started from another shell (record_call) reaches the
# same sockets. tests/settings.py turns the lookup off: the suite never joins a running Relay.
EMBEDDED_REDIS = not REDIS_URL
EMBEDDED_REDIS_URL_FILE = VAR_DIR / "embedded_redis_url"
if EMBEDDED_REDIS and EMBEDDED_REDIS_URL_FILE.exists():
    REDIS_URL = EMBEDDED_REDIS_URL_FILE.read_text().strip()
CACHES, CHANNEL_LAYERS = redis_settings(REDIS_URL)
