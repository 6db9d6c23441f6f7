"""Relay settings, read from environment variables (every one is listed in the README).

The embedded default needs no variable at all except SECRET_KEY, which `make run` provisions
under var/ on first start; DEBUG never supplies a secret outside development.
"""

import importlib.metadata
import ipaddress
import json
import os
import re
from datetime import timedelta
from pathlib import Path

import environ
import phonenumbers
from django.core.exceptions import ImproperlyConfigured
from redis.maint_notifications import MaintNotificationsConfig

from core.phone import country_codes_problem, parse_country_codes
from telephony.sip.dns import parse_trunk_uri

BASE_DIR = Path(__file__).resolve().parent.parent


class StrictEnv(environ.Env):
    """django-environ, except that a boolean must be a recognisable true/false word.

    environ.Env.bool() reads any unknown word as False; a typo such as DEBUG=ture would then
    silently switch a setting off. Here it fails at start-up instead.
    """

    TRUE = ("true", "1", "yes", "on")
    FALSE = ("false", "0", "no", "off")

    def bool(self, var, default=environ.Env.NOTSET):  # noqa: A003 - mirrors environ.Env
        raw = self.get_value(var, cast=str, default=default)
        if isinstance(raw, bool):
            return raw
        word = raw.strip().lower()
        if word in self.TRUE:
            return True
        if word in self.FALSE:
            return False
        raise ImproperlyConfigured(f"{var} must be true or false, not {raw!r}")


env = StrictEnv()

# Runtime files: the SQLite database, the embedded Redis socket, collected static files.
VAR_DIR = Path(env.str("RELAY_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()

DEBUG = env.bool("DEBUG", default=False)

# The embedded default is the database that needs no DATABASE_URL: a SQLite file under var/.
# There, every process started from the checkout (`make run`'s and any `manage.py` an operator
# runs from another shell) shares the secret `make run` generated into var/secret_key.
# Anywhere else a missing SECRET_KEY stops start-up: production never falls back to a file.
EMBEDDED_DATABASE = not env.str("DATABASE_URL", default="")
SECRET_KEY_FILE = VAR_DIR / "secret_key"

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY and EMBEDDED_DATABASE and SECRET_KEY_FILE.exists():
    SECRET_KEY = SECRET_KEY_FILE.read_text().strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. On the embedded default run `make run` once (it generates "
            f"{SECRET_KEY_FILE}); in production set SECRET_KEY to a long random value."
        )
    SECRET_KEY = "insecure-development-only-key-do-not-use-in-production"  # noqa: S105

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "relay.apps.RelayAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_tasks",
    "django_tasks_db",
    "accounts",
    "virtual_numbers",
    "captcha",
    "history",
    "realtime",
    "telephony",
    "webhooks",
    "matrix",
    "relay",  # the site itself: runrelay, the command that runs every process
]

MIDDLEWARE = [
    "relay.middleware.RequestIdMiddleware",
    "relay.middleware.AccessLogMiddleware",
    "relay.middleware.AllowedHostMiddleware",
    "relay.middleware.BodySizeLimitMiddleware",
    "relay.middleware.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "relay.urls"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# HTTP is served by gunicorn's threaded workers (relay/wsgi.py), WebSocket by Daphne
# (relay/asgi.py).
ASGI_APPLICATION = "relay.asgi.application"
WSGI_APPLICATION = "relay.wsgi.application"

# --- Database -------------------------------------------------------------------------------
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'relay.sqlite3'}"),
}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # Daphne, the task worker and management commands share one file: WAL lets readers run
    # beside the writer, IMMEDIATE takes the write lock up front (no deadlock on upgrade) and
    # the busy timeout makes a writer wait for the lock instead of failing "database is locked".
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env.int("SQLITE_BUSY_TIMEOUT", default=30),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not :memory:, so live-server tests with several threads share one database.
    _db["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
# Every server keeps its connections: a gunicorn worker's thread across requests, Daphne on the
# thread Channels runs database calls on. Each request (and each database_sync_to_async
# call) first checks a kept connection is still alive, so a database restart costs one
# reconnect, and /healthz still sees a database that is down.
_db["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
_db["CONN_HEALTH_CHECKS"] = True
if _db["ENGINE"] != "django.db.backends.sqlite3":
    # Or a psycopg pool (Django 5.1+) of at most this many connections per process.
    DATABASE_POOL_SIZE = env.int("DATABASE_POOL_SIZE", default=0)
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
CHANNEL_CAPACITY = env.int("CHANNEL_CAPACITY", default=5000)
# Every Redis operation on a request or socket path is bounded, so an unreachable or hung
# Redis answers the client (rate limits fail open, sockets close with 4503) instead of
# hanging it. Maintenance notifications stay off: redis-py 8 enables them by default on
# RESP3, and while they are on its pools hand out connections the server has already closed
# (after a Redis restart). relay/channel_layer.py explains the channel layer's side.
REDIS_CONNECT_TIMEOUT = 1.0
CHANNEL_LAYER_OPERATION_TIMEOUT = 2.0
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
            "BACKEND": "relay.channel_layer.BoundedRedisChannelLayer",
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


REDIS_URL = env.str("REDIS_URL", default="")
# Without REDIS_URL, `runrelay` starts an embedded Redis and writes its URL to this file while
# it runs, so that a management command started from another shell (record_call) reaches the
# same sockets. tests/settings.py turns the lookup off: the suite never joins a running Relay.
EMBEDDED_REDIS = not REDIS_URL
EMBEDDED_REDIS_URL_FILE = VAR_DIR / "embedded_redis_url"
# Where a running `runrelay` serves (http://host:port), for commands that talk to it.
SERVING_URL_FILE = VAR_DIR / "serving_url"
if EMBEDDED_REDIS and EMBEDDED_REDIS_URL_FILE.exists():
    REDIS_URL = EMBEDDED_REDIS_URL_FILE.read_text().strip()
CACHES, CHANNEL_LAYERS = redis_settings(REDIS_URL)

# --- Tasks ------------------------------------------------------------------------------------
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default"],
    }
}

# --- Auth -----------------------------------------------------------------------------------
AUTH_USER_MODEL = "accounts.User"
# Argon2id at parameters from the environment, by default OWASP's minimum (Password Storage
# Cheat Sheet: m=19 MiB, t=2, p=1; docs/decisions.md). The first hasher hashes; a stored hash
# with other parameters is re-hashed on the next successful login (Django's must_update).
# Django's own Argon2 hasher has the same algorithm name, `argon2`, so of the two it is the
# one Django picks to verify a stored `argon2$` hash; either verifies any Argon2 hash, with
# the parameters the hash carries. It stays listed for that, and PBKDF2 for any older hash.
PASSWORD_HASHERS = [
    "core.passwords.ConfiguredArgon2PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]


def _whole_number(
    name: str, default: int, *, minimum: int = 1, maximum: int, unit: str = ""
) -> int:
    """A whole-number variable within [minimum, maximum]; ImproperlyConfigured, in one line,
    for anything else (env.int would stop start-up with a traceback on "19MiB")."""
    raw = env.str(name, default=str(default)).strip()
    if not (raw.isascii() and raw.isdigit()) or not minimum <= int(raw) <= maximum:
        raise ImproperlyConfigured(
            f"{name} must be a whole number from {minimum} to {maximum}{unit}, not {raw!r}"
        )
    return int(raw)


# Argon2's own bounds (argon2.h): a value outside them would fail every hash, at login time.
PASSWORD_ARGON2_TIME_COST = _whole_number("PASSWORD_ARGON2_TIME_COST", 2, maximum=2**32 - 1)
PASSWORD_ARGON2_PARALLELISM = _whole_number("PASSWORD_ARGON2_PARALLELISM", 1, maximum=2**24 - 1)
PASSWORD_ARGON2_MEMORY_KIB = _whole_number(
    "PASSWORD_ARGON2_MEMORY_KIB",
    19456,
    minimum=8 * PASSWORD_ARGON2_PARALLELISM,  # 8 KiB per lane
    maximum=2**32 - 1,
    unit=" (KiB; at least 8 per lane of PASSWORD_ARGON2_PARALLELISM)",
)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Password and PIN hashes computed at once by all of Relay's processes sharing the slot files
# under PASSWORD_HASHING_SLOTS_DIR (core/passwords.py). A hash keeps
# PASSWORD_ARGON2_PARALLELISM cores busy: more slots than cores make each login slower, not
# more of them faster, and take the cores other requests need. A request that finds every
# slot taken waits its turn in a queue shared by every process, up to
# PASSWORD_HASH_WAIT_SECONDS; it is answered 503 service_unavailable with Retry-After at once
# when the queue already holds more than fits in that wait, or PASSWORD_HASH_QUEUE_MAX
# requests (by default every HTTP thread but one per worker: a burst that large is served
# with one slot, and a flood is refused at once past it).
PASSWORD_HASHING_SLOTS_DIR = VAR_DIR / "hashing-slots"
PASSWORD_HASH_CONCURRENCY = _whole_number(
    "PASSWORD_HASH_CONCURRENCY", max(1, _usable_cpus() // 2), maximum=1024
)


def _wait_seconds(name: str, default: float, *, maximum: float) -> float:
    raw = env.str(name, default=str(default)).strip()
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= maximum:
        raise ImproperlyConfigured(f"{name} must be seconds from 0 to {maximum:g}, not {raw!r}")
    return value


PASSWORD_HASH_WAIT_SECONDS = _wait_seconds("PASSWORD_HASH_WAIT_SECONDS", 2.0, maximum=30)

# Server processes (runrelay, relay/gunicorn_conf.py): gunicorn workers for HTTP, two per
# core, each serving HTTP_THREADS requests at once on threads of its own (gthread), so that a
# request that waits (its turn to hash a password, the database) holds a thread, not the
# process: a flood of logins no longer leaves every other request in the listen backlog.
# Daphne processes share the WebSocket port.
HTTP_WORKERS = _whole_number("HTTP_WORKERS", 2 * _usable_cpus(), maximum=256)
HTTP_THREADS = _whole_number("HTTP_THREADS", 8, maximum=64)
WS_PROCESSES = _whole_number("WS_PROCESSES", 1, maximum=64)
# Waiting requests hold threads: by default every thread but one per worker may wait, so a
# burst of logins that large is served, and each worker keeps a thread for everything else.
PASSWORD_HASH_QUEUE_MAX = _whole_number(
    "PASSWORD_HASH_QUEUE_MAX",
    max(1, HTTP_WORKERS * (HTTP_THREADS - 1)),
    minimum=0,
    maximum=4096,
)

AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
        "OPTIONS": {"user_attributes": ("email",)},
    },
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
PASSWORD_MAX_LENGTH = 256

JWT_ACCESS_TTL = env.int("JWT_ACCESS_TTL", default=24 * 60 * 60)
SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(seconds=JWT_ACCESS_TTL),
    "ALGORITHM": "HS256",
    "SIGNING_KEY": env.str("JWT_SIGNING_KEY", default=SECRET_KEY),
    "AUTH_HEADER_TYPES": ("Bearer",),
    "USER_ID_FIELD": "id",
    "USER_ID_CLAIM": "user_id",
    "UPDATE_LAST_LOGIN": False,
    "LEEWAY": 0,
}

# Fernet keys (comma-separated, newest first) that encrypt API keys at rest. When unset, one
# key is derived from SECRET_KEY; set it explicitly so SECRET_KEY can rotate on its own.
API_KEY_ENCRYPTION_KEYS = env.list("API_KEY_ENCRYPTION_KEYS", default=[])
API_KEY_PREFIX = "vr_"

# Login sessions: last_seen moves at most this often; the dashboard lists this many.
SESSION_TOUCH_INTERVAL = 60
DASHBOARD_SESSION_COUNT = 20

PUBLIC_WS_URL = env.str("PUBLIC_WS_URL", default="")
# The socket server's own port when it listens beside the HTTP server rather than behind the
# same address (runrelay sets it for its children): wsUrl is then the request's host at this
# port. Unset, wsUrl is the request's own host and port (a proxy that routes /ws to Daphne).
WS_PORT = env.int("WS_PORT", default=0) or None

# Clients reach us through this many reverse proxies, each appending to X-Forwarded-For.
# 0 trusts no header at all: the client address is the socket's peer.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)

# Rate limits, "<count>/<s|m|h>".
RATE_LIMIT_AUTH_PER_IP = env.str("RATE_LIMIT_AUTH_PER_IP", default="30/m")
RATE_LIMIT_AUTH_PER_EMAIL = env.str("RATE_LIMIT_AUTH_PER_EMAIL", default="10/m")
RATE_LIMIT_CAPTCHA_PER_IP = env.str("RATE_LIMIT_CAPTCHA_PER_IP", default="60/m")
RATE_LIMIT_CAPTCHA_VERIFY_PER_IP = env.str("RATE_LIMIT_CAPTCHA_VERIFY_PER_IP", default="20/m")

# Forwarding settings a user may store (PUT /api/numbers/:id/forwarding); each is checked
# against the dialing policy, so the limit also caps probing it.
RATE_LIMIT_FORWARDING_PER_USER = env.str("RATE_LIMIT_FORWARDING_PER_USER", default="30/h")

HISTORY_MAX_LIMIT = 200

# --- Calls -----------------------------------------------------------------------------------
RATE_LIMIT_CALLS_PER_USER = env.str("RATE_LIMIT_CALLS_PER_USER", default="60/m")
TELEPHONY_PROVIDER = env.str("TELEPHONY_PROVIDER", default="simulated")
if TELEPHONY_PROVIDER not in ("simulated", "sip"):
    raise ImproperlyConfigured(
        f"TELEPHONY_PROVIDER must be simulated or sip, not {TELEPHONY_PROVIDER!r}"
    )
SERVICE_CALLER_ID = env.str("SERVICE_CALLER_ID", default="+441632960000")
SIMULATED_STEP_SECONDS = env.float("SIMULATED_STEP_SECONDS", default=1.0)
SIMULATED_TALK_SCALE = env.float("SIMULATED_TALK_SCALE", default=0.1)
# A call whose next step is this late (and has no task waiting) lost its worker.
CALL_RECOVERY_GRACE = env.int("CALL_RECOVERY_GRACE", default=30)
CALL_RECOVERY_INTERVAL = env.float("CALL_RECOVERY_INTERVAL", default=10.0)
CALL_MAX_RECOVERIES = env.int("CALL_MAX_RECOVERIES", default=3)
WORKER_POLL_INTERVAL = env.float("WORKER_POLL_INTERVAL", default=0.2)

# --- Webhooks (docs/webhooks.md) ------------------------------------------------------------
# Deliveries to private, loopback or link-local addresses are refused unless this is on.
WEBHOOK_ALLOW_PRIVATE = env.bool("WEBHOOK_ALLOW_PRIVATE", default=False)
# How long a delivery is retried; a webhook failing for this long is disabled.
WEBHOOK_RETRY_HOURS = env.int("WEBHOOK_RETRY_HOURS", default=24)
# What every worker runs every CALL_RECOVERY_INTERVAL besides its tasks: each pass finds work
# whose task was lost (a dead worker's calls, undelivered webhooks) and queues it again.
WORKER_PERIODIC_PASSES = [
    "realtime.tasks.calls_recover",
    "webhooks.services.deliveries_sweep",
    "matrix.services.messages_sweep",
]

# --- Matrix (docs/matrix.md) -----------------------------------------------------------------
# The bot's homeserver, its access token (one fixed token: a login per send would be a new
# device, and Synapse de-duplicates transaction ids per device) and its user id. All three
# set: the bot runs (runrelay starts `manage.py matrix_bot`); none: Matrix is off and nothing
# is queued.
MATRIX_HOMESERVER_URL = env.str("MATRIX_HOMESERVER_URL", default="")
MATRIX_BOT_ACCESS_TOKEN = env.str("MATRIX_BOT_ACCESS_TOKEN", default="")
MATRIX_BOT_USER_ID = env.str("MATRIX_BOT_USER_ID", default="")
_matrix_settings = {
    "MATRIX_HOMESERVER_URL": MATRIX_HOMESERVER_URL,
    "MATRIX_BOT_ACCESS_TOKEN": MATRIX_BOT_ACCESS_TOKEN,
    "MATRIX_BOT_USER_ID": MATRIX_BOT_USER_ID,
}
MATRIX_ENABLED = all(_matrix_settings.values())
if any(_matrix_settings.values()) and not MATRIX_ENABLED:
    _missing = ", ".join(name for name, value in _matrix_settings.items() if not value)
    raise ImproperlyConfigured(f"Matrix needs all three of its settings; {_missing} unset")
if MATRIX_HOMESERVER_URL and not re.match(r"^https?://[^/\s]+", MATRIX_HOMESERVER_URL):
    raise ImproperlyConfigured(
        f"MATRIX_HOMESERVER_URL must be an http(s) URL, not {MATRIX_HOMESERVER_URL!r}"
    )
if MATRIX_BOT_USER_ID and not re.match(r"^@[^:\s]+:\S+$", MATRIX_BOT_USER_ID):
    raise ImproperlyConfigured(
        f"MATRIX_BOT_USER_ID must be a Matrix user id like @relay:example.com, not "
        f"{MATRIX_BOT_USER_ID!r}"
    )
# New Matrix ids a user may set (each is a room and an invite, and says whether it exists).
RATE_LIMIT_MATRIX_ID_PER_USER = env.str("RATE_LIMIT_MATRIX_ID_PER_USER", default="10/h")
# How long one /sync long-poll waits (seconds), and how long a message is retried.
MATRIX_SYNC_TIMEOUT = env.float("MATRIX_SYNC_TIMEOUT", default=30.0)
MATRIX_RETRY_HOURS = env.int("MATRIX_RETRY_HOURS", default=24)

# --- SIP (TELEPHONY_PROVIDER=sip; docs/telephony.md) ------------------------------------------
SIP_TRUNK_URI = env.str("SIP_TRUNK_URI", default="")
SIP_USERNAME = env.str("SIP_USERNAME", default="")
SIP_PASSWORD = env.str("SIP_PASSWORD", default="")
# udp, tcp or tls; a sips: trunk URI means tls (docs/telephony.md, "TLS and SRTP").
SIP_TRANSPORT = env.str(
    "SIP_TRANSPORT", default="tls" if SIP_TRUNK_URI.lower().startswith("sips:") else "udp"
).lower()
# TLS: the CA bundle the trunk's certificate is checked against (default: the system's), and
# the agent's own certificate and key (for inbound calls over TLS, and trunks that want
# mutual TLS).
SIP_TLS_CA_FILE = env.str("SIP_TLS_CA_FILE", default="")
SIP_TLS_CERT_FILE = env.str("SIP_TLS_CERT_FILE", default="")
SIP_TLS_KEY_FILE = env.str("SIP_TLS_KEY_FILE", default="")
# SRTP (SDES, AES_CM_128_HMAC_SHA1_80): off, optional (offered, and taken when offered) or
# required (an unencrypted call is refused). Keys travel in the SDP: only over TLS.
SIP_SRTP = env.str("SIP_SRTP", default="off").lower()
# REGISTER with the trunk (as SIP_USERNAME) and keep the registration fresh; for trunks that
# want it. Trunks that only challenge each INVITE need only the credentials.
SIP_REGISTER = env.bool("SIP_REGISTER", default=False)
SIP_REGISTER_EXPIRES = env.int("SIP_REGISTER_EXPIRES", default=300)
SIP_BIND = env.str("SIP_BIND", default="0.0.0.0:5060")  # noqa: S104 - a SIP agent listens
SIP_PUBLIC_ADDRESS = env.str("SIP_PUBLIC_ADDRESS", default="")
# Symmetric RTP: media from a source other than the SDP's address (a caller behind NAT) is
# latched onto in the first seconds, and answered there (docs/telephony.md, "Media").
SIP_MEDIA_LATCHING = env.bool("SIP_MEDIA_LATCHING", default=True)
RTP_PORT_RANGE = env.str("RTP_PORT_RANGE", default="20000-20999")
SIP_RING_TIMEOUT = env.float("SIP_RING_TIMEOUT", default=30.0)
SIP_MAX_CALL_SECONDS = env.float("SIP_MAX_CALL_SECONDS", default=300.0)
SIP_MAX_CONCURRENT_CALLS = env.int("SIP_MAX_CONCURRENT_CALLS", default=50)
SIP_AGENTS = env.int("SIP_AGENTS", default=1)
SIP_POLL_INTERVAL = env.float("SIP_POLL_INTERVAL", default=0.05)
TTS_DEFAULT_LANGUAGE = env.str("TTS_DEFAULT_LANGUAGE", default="en")
TTS_CACHE_DIR = Path(env.str("TTS_CACHE_DIR", default=str(VAR_DIR / "tts")))
# The speech cache's bound: purge_expired removes the messages used longest ago past it, never
# one used within a call's longest life (telephony.speech.cache_trim).
TTS_CACHE_MAX_MB = _whole_number("TTS_CACHE_MAX_MB", 500, maximum=10**7, unit=" (MB)")
# Inbound calls to the numbers (docs/telephony.md): they ring this long, then voicemail answers.
INBOUND_RING_SECONDS = env.float("INBOUND_RING_SECONDS", default=20.0)
VOICEMAIL_MAX_SECONDS = env.float("VOICEMAIL_MAX_SECONDS", default=120.0)
VOICEMAIL_SILENCE_SECONDS = env.float("VOICEMAIL_SILENCE_SECONDS", default=5.0)
VOICEMAIL_RETENTION_DAYS = env.int("VOICEMAIL_RETENTION_DAYS", default=30)
# Where inbound calls may come from: the trunk's own address always, plus these addresses
# or networks (comma-separated; `any` takes calls from anywhere).
SIP_INBOUND_SOURCES = env.list("SIP_INBOUND_SOURCES", default=[])
# The region of numbers a trunk sends in national form (020 7946 0001), as phonenumbers
# knows regions (GB, US, DE...).
SIP_NATIONAL_REGION = env.str("SIP_NATIONAL_REGION", default="GB").upper()


def _sip_settings() -> tuple[str, int, tuple[int, int]]:
    """SIP_BIND as (host, port) and RTP_PORT_RANGE as (first, last); ImproperlyConfigured,
    in one line, for anything the telephony agent could not start with."""
    from realtime.languages import LANGUAGES

    host, _, port = SIP_BIND.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ImproperlyConfigured(
            f"SIP_BIND must be host:port, like 0.0.0.0:5060, not {SIP_BIND!r}"
        )
    first, _, last = RTP_PORT_RANGE.partition("-")
    if not (first.isdigit() and last.isdigit() and 1024 <= int(first) < int(last) <= 65535):
        raise ImproperlyConfigured(
            f"RTP_PORT_RANGE must be first-last within 1024-65535, like 20000-20999, "
            f"not {RTP_PORT_RANGE!r}"
        )
    if int(last) - int(first) < 2 * SIP_MAX_CONCURRENT_CALLS * SIP_AGENTS:
        raise ImproperlyConfigured(
            "RTP_PORT_RANGE is too small: each call needs two ports, for "
            f"SIP_MAX_CONCURRENT_CALLS ({SIP_MAX_CONCURRENT_CALLS}) calls on each of "
            f"SIP_AGENTS ({SIP_AGENTS}) agents"
        )
    try:
        trunk = parse_trunk_uri(SIP_TRUNK_URI)
    except ValueError:
        trunk = None
    if TELEPHONY_PROVIDER == "sip" and trunk is None:
        raise ImproperlyConfigured(
            f"SIP_TRUNK_URI must be a sip: or sips: URI, like sip:trunk.example.com or "
            f"sip:203.0.113.5:5060, not {SIP_TRUNK_URI!r}"
        )
    if SIP_TRANSPORT not in ("udp", "tcp", "tls"):
        raise ImproperlyConfigured(f"SIP_TRANSPORT must be udp, tcp or tls, not {SIP_TRANSPORT!r}")
    # The agent speaks SIP_TRANSPORT only: a trunk URI that asks for another (sips: means TLS)
    # could never be reached, and a sips: URI is never sent in clear.
    wanted = trunk and (trunk.transport or ("tls" if trunk.secure else None))
    if TELEPHONY_PROVIDER == "sip" and wanted and wanted != SIP_TRANSPORT:
        raise ImproperlyConfigured(
            f"SIP_TRUNK_URI asks for {wanted} (a sips: URI or a transport= parameter), but "
            f"SIP_TRANSPORT is {SIP_TRANSPORT}"
        )
    for name in ("SIP_TLS_CA_FILE", "SIP_TLS_CERT_FILE", "SIP_TLS_KEY_FILE"):
        if globals()[name] and not Path(globals()[name]).is_file():
            raise ImproperlyConfigured(f"{name} names no readable file: {globals()[name]!r}")
    if bool(SIP_TLS_CERT_FILE) != bool(SIP_TLS_KEY_FILE):
        raise ImproperlyConfigured("SIP_TLS_CERT_FILE and SIP_TLS_KEY_FILE are set together")
    if SIP_SRTP not in ("off", "optional", "required"):
        raise ImproperlyConfigured(f"SIP_SRTP must be off, optional or required, not {SIP_SRTP!r}")
    if SIP_SRTP != "off" and SIP_TRANSPORT != "tls":
        raise ImproperlyConfigured(
            "SIP_SRTP needs SIP_TRANSPORT=tls: its keys travel in the SDP, which must not "
            "cross the network in clear"
        )
    if SIP_REGISTER and not SIP_USERNAME:
        raise ImproperlyConfigured("SIP_REGISTER needs SIP_USERNAME and SIP_PASSWORD")
    if bool(SIP_USERNAME) != bool(SIP_PASSWORD):
        raise ImproperlyConfigured("SIP_USERNAME and SIP_PASSWORD are set together or not at all")
    for name in (
        "SIP_RING_TIMEOUT",
        "SIP_MAX_CALL_SECONDS",
        "SIP_POLL_INTERVAL",
        "INBOUND_RING_SECONDS",
        "VOICEMAIL_MAX_SECONDS",
        "VOICEMAIL_SILENCE_SECONDS",
    ):
        if globals()[name] <= 0:
            raise ImproperlyConfigured(f"{name} must be more than 0")
    for name in ("SIP_MAX_CONCURRENT_CALLS", "SIP_AGENTS"):
        if globals()[name] < 1:
            raise ImproperlyConfigured(f"{name} must be at least 1")
    if VOICEMAIL_RETENTION_DAYS < 1:
        raise ImproperlyConfigured("VOICEMAIL_RETENTION_DAYS must be at least 1")
    for source in SIP_INBOUND_SOURCES:
        if source.lower() == "any":
            continue
        try:
            ipaddress.ip_network(source, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"SIP_INBOUND_SOURCES must list IP addresses or networks (or any), not {source!r}"
            ) from None
    if SIP_NATIONAL_REGION not in phonenumbers.SUPPORTED_REGIONS:
        raise ImproperlyConfigured(
            f"SIP_NATIONAL_REGION must be a region code like GB or US, not {SIP_NATIONAL_REGION!r}"
        )
    if TTS_DEFAULT_LANGUAGE not in LANGUAGES:
        raise ImproperlyConfigured(
            f"TTS_DEFAULT_LANGUAGE {TTS_DEFAULT_LANGUAGE!r} is not a language espeak-ng speaks "
            "(see realtime/languages.py)"
        )
    return host, int(port), (int(first), int(last))


def _dns_servers(values: list[str]) -> list[tuple[str, int]]:
    """SIP_DNS_SERVERS as [(ip, port)]: `192.0.2.53`, `192.0.2.53:5353`, `2001:db8::53` or
    `[2001:db8::53]:5353`; ImproperlyConfigured, in one line, for anything else."""
    servers = []
    for value in values:
        if value.startswith("["):
            address, _, port = value[1:].partition("]")
            port = port.removeprefix(":")
        elif value.count(":") == 1:
            address, _, port = value.partition(":")
        else:
            address, port = value, ""
        try:
            ipaddress.ip_address(address)
            number = int(port or 53)
        except ValueError:
            number = 0
        if not 0 < number < 65536:
            raise ImproperlyConfigured(
                "SIP_DNS_SERVERS must list IP addresses, each with an optional port, like "
                f"192.0.2.53,192.0.2.54:5353, not {value!r}"
            )
        servers.append((address, number))
    return servers


SIP_BIND_HOST, SIP_BIND_PORT, RTP_PORTS = _sip_settings()
# The DNS servers that find the trunk (RFC 3263: NAPTR, SRV, A/AAAA), comma-separated;
# empty: the system's resolvers.
SIP_DNS_SERVERS = _dns_servers(env.list("SIP_DNS_SERVERS", default=[]))

# --- Dialing policy, plans and sign-up (core/dialing.py, accounts/quotas.py) ----------------
# The countries Relay dials (ISO 3166 codes, comma-separated; `*`: all); default: the home
# country, SIP_NATIONAL_REGION's. Premium-rate and similar numbers only with DIAL_ALLOW_PREMIUM.
DIAL_ALLOWED_COUNTRIES = parse_country_codes(
    env.str("DIAL_ALLOWED_COUNTRIES", default=SIP_NATIONAL_REGION)
)
if _problem := country_codes_problem(DIAL_ALLOWED_COUNTRIES):
    raise ImproperlyConfigured(f"DIAL_ALLOWED_COUNTRIES: {_problem}")
if not DIAL_ALLOWED_COUNTRIES:
    raise ImproperlyConfigured("DIAL_ALLOWED_COUNTRIES must name a country (or be *)")
DIAL_ALLOW_PREMIUM = env.bool("DIAL_ALLOW_PREMIUM", default=False)

# Whether anyone may register (POST /api/auth/register); when false, staff create users in
# the admin or with `manage.py createuser`.
REGISTRATION_OPEN = env.bool("REGISTRATION_OPEN", default=True)

# A user refused this many times in an hour (destinations and quotas) is flagged for staff.
FRAUD_FLAG_REFUSALS_PER_HOUR = _whole_number("FRAUD_FLAG_REFUSALS_PER_HOUR", 20, maximum=10**6)

# Plans: `free` and any others PLANS names. Each plan's limits are PLAN_<NAME>_<LIMIT>; a
# plan other than free takes free's value for a limit it does not set. The quotas (calls and
# answered seconds per rolling day, calls up at once) may also be `unlimited`.
PLAN_DEFAULTS = {
    "numbers": 5,
    "calls_per_day": 50,
    "call_seconds_per_day": 1800,
    "concurrent_calls": 3,
}
PLAN_NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")


def _plan_limit(name: str, default: int | None, *, quota: bool) -> int | None:
    raw = env.str(name, default=None)
    unset_unlimited = raw is None and default is None
    if quota and (unset_unlimited or (raw or "").strip().lower() == "unlimited"):
        return None
    unit = " (or unlimited)" if quota else ""
    return _whole_number(name, default, minimum=0, maximum=10**9, unit=unit)


def _plans() -> dict[str, dict[str, int | None]]:
    names = [name.strip().lower() for name in env.list("PLANS", default=["free"])]
    for name in names:
        if not PLAN_NAME.fullmatch(name):
            raise ImproperlyConfigured(
                f"PLANS must list plan names like free,pro (a-z, 0-9, _), not {name!r}"
            )
    plans: dict[str, dict[str, int | None]] = {}
    for name in ["free", *(n for n in names if n != "free")]:
        base = plans.get("free", PLAN_DEFAULTS)
        plans[name] = {
            key: _plan_limit(
                f"PLAN_{name.upper()}_{key.upper()}", base[key], quota=key != "numbers"
            )
            for key in PLAN_DEFAULTS
        }
    return plans


PLANS = _plans()
PLAN_NUMBER_LIMITS = {name: limits["numbers"] for name, limits in PLANS.items()}

# --- REST framework ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.SessionJWTAuthentication",
        "accounts.authentication.ApiKeyAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["core.parsing.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "core.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.schema.RelayAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Relay API",
    # The conventions and the WebSocket protocol, shown at the top of Swagger UI (/api/docs).
    "DESCRIPTION": (BASE_DIR / "relay" / "api_description.md").read_text(),
    # One version: the package's (pyproject.toml, as installed by `make install`).
    "VERSION": importlib.metadata.version("relay"),
    # Relative: the server that serves the document, whatever name or proxy it is reached by.
    "SERVERS": [{"url": "/", "description": "The Relay serving this document"}],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.schema.postprocess",  # the per-status error components, Retry-After
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        # Named from the models' own choices, so the schema's enums cannot drift from them.
        "CallRecordStatusEnum": "history.models.CALL_STATUS_VALUES",
        "CallStateEnum": "realtime.models.CALL_STATE_VALUES",
    },
}

# --- Static files and stored files ---------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # created with VAR_DIR by RelayConfig.ready()
# Voicemail recordings go through Django's storage API: files under var/recordings by
# default, any django-storages backend in production (its options as JSON).
RECORDING_STORAGE_BACKEND = env.str(
    "RECORDING_STORAGE_BACKEND", default="django.core.files.storage.FileSystemStorage"
)
try:
    RECORDING_STORAGE_OPTIONS = json.loads(
        env.str("RECORDING_STORAGE_OPTIONS", default="")
        or json.dumps({"location": str(VAR_DIR / "recordings")})
    )
except ValueError:
    RECORDING_STORAGE_OPTIONS = None
if not isinstance(RECORDING_STORAGE_OPTIONS, dict):
    raise ImproperlyConfigured("RECORDING_STORAGE_OPTIONS must be a JSON object")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "recordings": {"BACKEND": RECORDING_STORAGE_BACKEND, "OPTIONS": RECORDING_STORAGE_OPTIONS},
}
# Serve straight from the app folders too, so a checkout works before collectstatic has run.
WHITENOISE_USE_FINDERS = True

# --- Misc -------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Behind TLS in production set these (docs/operations.md); off by default so `make run`
# works over plain http on localhost.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # load balancers probe over plain http
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# The largest JSON body the API reads (DRF reads the request stream itself, so Django's
# DATA_UPLOAD_MAX_MEMORY_SIZE never applies to it). Larger bodies get 413.
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=64 * 1024)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if TRUSTED_PROXY_COUNT > 0 else None

# /metrics (Prometheus) wants `Authorization: Bearer <METRICS_TOKEN>`; unset, it is a 404.
# The embedded default reads the token `make run` generated into var/metrics_token, as it
# reads its secret key. runrelay points every process at PROMETHEUS_MULTIPROC_DIR (default
# var/metrics) so that the scrape sums them all (docs/operations.md, "Metrics").
METRICS_TOKEN_FILE = VAR_DIR / "metrics_token"
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
if not METRICS_TOKEN and EMBEDDED_DATABASE and METRICS_TOKEN_FILE.exists():
    METRICS_TOKEN = METRICS_TOKEN_FILE.read_text().strip()
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters (or unset).")
METRICS_DIR = Path(env.str("PROMETHEUS_MULTIPROC_DIR", default=str(VAR_DIR / "metrics")))

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# plain: one line of text per record; json: one JSON object per line (relay.logging).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact": {"()": "relay.logging.RedactSecretsFilter"},
        "request_id": {"()": "relay.logging.RequestIdFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "relay.logging.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["redact", "request_id"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Our access line replaces Django's "Not Found: /path" warnings.
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "ERROR"},
        "daphne": {"level": "WARNING"},
        # httpx logs every request's URL at INFO: Matrix ids and room ids of users, webhook
        # URLs. Relay logs what it needs itself, without them.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
