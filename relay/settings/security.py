"""Security: the secret key, the hosts served, TLS and the proxies in front, passwords and the
cap on hashing them, tokens and API keys, and the limits on logins and CAPTCHAs."""

from datetime import timedelta

from csp.constants import NONE, SELF, UNSAFE_INLINE

from relay.settings.base import DEBUG, VAR_DIR
from relay.settings.database import EMBEDDED_DATABASE
from relay.settings.http import HTTP_THREADS, HTTP_WORKERS, usable_cpus
from relay.settings.readers import boolean, must, rate, seconds, text, whole_number, words

# On the embedded default (no DATABASE_URL) every process started from the checkout
# (`make run`'s and any `manage.py` an operator runs from another shell) shares the secret
# `make run` generated into var/secret_key. Anywhere else a missing SECRET_KEY stops
# start-up: production never falls back to a file.
SECRET_KEY_FILE = VAR_DIR / "secret_key"

SECRET_KEY = text("SECRET_KEY")
if not SECRET_KEY and EMBEDDED_DATABASE and SECRET_KEY_FILE.exists():
    SECRET_KEY = SECRET_KEY_FILE.read_text().strip()
must(
    SECRET_KEY or DEBUG,
    "SECRET_KEY is not set. On the embedded default run `make run` once (it generates "
    f"{SECRET_KEY_FILE}); in production set SECRET_KEY to a long random value.",
)
if not SECRET_KEY:
    SECRET_KEY = "insecure-development-only-key-do-not-use-in-production"  # noqa: S105

# Django's test client's `testserver` is the test settings' alone (tests/settings.py): here it
# would be one more name a request could mint a mailed link for (issue 53).
ALLOWED_HOSTS = words("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = words("CSRF_TRUSTED_ORIGINS")

# Clients reach us through this many reverse proxies, each appending to X-Forwarded-For.
# 0 trusts no header at all: the client address is the socket's peer.
TRUSTED_PROXY_COUNT = whole_number("TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=100)

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Behind TLS in production set these (docs/operations.md); off by default so `make run`
# works over plain http on localhost.
SECURE_SSL_REDIRECT = boolean("SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # load balancers probe over plain http
SECURE_HSTS_SECONDS = whole_number(
    "SECURE_HSTS_SECONDS", 0, minimum=0, maximum=2**31 - 1, unit=" (seconds)"
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = boolean("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = boolean("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = boolean("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# The console's cookies (docs/console.md): never sent on another site's POST, and the session
# one out of scripts' reach. Django's defaults, stated so no upgrade or edit moves them silently.
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_HTTPONLY = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if TRUSTED_PROXY_COUNT > 0 else None

# --- Content-Security-Policy (django-csp; docs/console.md) ---------------------------------
# Every response but the admin's and Swagger UI's: the console's pages run only the scripts and
# style sheets served from here (no inline script, no eval, no style attribute), connect only
# here and to the socket (relay.content_security_policy adds its origin per request), and are
# framed, re-based and posted elsewhere by nobody. JSON answers carry it too: harmless there,
# and one rule for the whole site is easier to keep than a list of paths.
CONTENT_SECURITY_POLICY = {
    # drf-spectacular's Swagger UI page carries an inline script and style block of its own.
    "EXCLUDE_URL_PREFIXES": ("/api/docs",),
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}
# The admin's pages (under the admin site's own URL): scripts as strict, but style attributes
# allowed: Relay's dashboard and list columns write them, as Django's vendored widgets may.
CONTENT_SECURITY_POLICY_ADMIN = {
    **CONTENT_SECURITY_POLICY["DIRECTIVES"],
    "style-src": [SELF, UNSAFE_INLINE],
}

# --- Passwords ------------------------------------------------------------------------------
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

# Argon2's own bounds (argon2.h): a value outside them would fail every hash, at login time.
PASSWORD_ARGON2_TIME_COST = whole_number("PASSWORD_ARGON2_TIME_COST", 2, maximum=2**32 - 1)
PASSWORD_ARGON2_PARALLELISM = whole_number("PASSWORD_ARGON2_PARALLELISM", 1, maximum=2**24 - 1)
PASSWORD_ARGON2_MEMORY_KIB = whole_number(
    "PASSWORD_ARGON2_MEMORY_KIB",
    19456,
    minimum=8 * PASSWORD_ARGON2_PARALLELISM,  # 8 KiB per lane
    maximum=2**32 - 1,
    unit=" (KiB; at least 8 per lane of PASSWORD_ARGON2_PARALLELISM)",
)

# Password and PIN hashes computed at once by all of Relay's processes sharing the slot files
# under PASSWORD_HASHING_SLOTS_DIR (core/passwords.py). A hash keeps
# PASSWORD_ARGON2_PARALLELISM cores busy: more slots than cores make each login slower, not
# more of them faster, and take the cores other requests need. A request that finds every
# slot taken waits its turn in a queue shared by every process, up to
# PASSWORD_HASH_WAIT_SECONDS; it is answered 503 service_unavailable with Retry-After at once
# when the queue already holds more than fits in that wait, or PASSWORD_HASH_QUEUE_MAX
# requests. The wait counts from when the request reached the server, its time in gunicorn's
# own queue included.
PASSWORD_HASHING_SLOTS_DIR = VAR_DIR / "hashing-slots"
PASSWORD_HASH_CONCURRENCY = whole_number(
    "PASSWORD_HASH_CONCURRENCY", max(1, usable_cpus() // 2), maximum=1024
)
PASSWORD_HASH_WAIT_SECONDS = seconds("PASSWORD_HASH_WAIT_SECONDS", 2.0, maximum=30)
# A request waiting for its turn to hash holds a thread. Each server process lends at most this
# many of its threads to requests that hash (waiting or hashing); one more is refused 503 at
# once, before its view runs. gunicorn gives each worker these threads on top of its
# HTTP_THREADS (relay/gunicorn_conf.py), so a flood of logins never holds a thread /me needs.
# Twice HTTP_THREADS: a burst of 16 logins spread unevenly over 4 workers found one worker's
# 8 taken and was partly refused (docs/benchmarks.md, http_logins).
PASSWORD_HASH_THREADS = whole_number("PASSWORD_HASH_THREADS", 2 * HTTP_THREADS, maximum=64)
# By default as many may wait as the workers have hashing threads, so a burst of logins that
# large is served, and a flood is refused at once past it.
PASSWORD_HASH_QUEUE_MAX = whole_number(
    "PASSWORD_HASH_QUEUE_MAX",
    HTTP_WORKERS * PASSWORD_HASH_THREADS,
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

# --- Tokens, API keys and login sessions ------------------------------------------------------
JWT_ACCESS_TTL = whole_number(
    "JWT_ACCESS_TTL", 24 * 60 * 60, maximum=366 * 24 * 60 * 60, unit=" (seconds)"
)
SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(seconds=JWT_ACCESS_TTL),
    "ALGORITHM": "HS256",
    "SIGNING_KEY": text("JWT_SIGNING_KEY", SECRET_KEY),
    "AUTH_HEADER_TYPES": ("Bearer",),
    "USER_ID_FIELD": "id",
    "USER_ID_CLAIM": "user_id",
    "UPDATE_LAST_LOGIN": False,
    "LEEWAY": 0,
}

# Fernet keys (comma-separated, newest first) that encrypt API keys at rest. When unset, one
# key is derived from SECRET_KEY; set it explicitly so SECRET_KEY can rotate on its own.
API_KEY_ENCRYPTION_KEYS = words("API_KEY_ENCRYPTION_KEYS")
API_KEY_PREFIX = "vr_"

# Login sessions: last_seen moves at most this often; the dashboard lists this many.
SESSION_TOUCH_INTERVAL = 60
DASHBOARD_SESSION_COUNT = 20

# --- Rate limits of sign-up, login and the CAPTCHA, "<count>/<s|m|h>" -------------------------
RATE_LIMIT_AUTH_PER_IP = rate("RATE_LIMIT_AUTH_PER_IP", "30/m")
RATE_LIMIT_AUTH_PER_EMAIL = rate("RATE_LIMIT_AUTH_PER_EMAIL", "10/m")
# Password resets asked for: per client IP, and per address whether an account has it or not
# (so the limit says nothing of which addresses are known).
RATE_LIMIT_PASSWORD_RESET_PER_IP = rate("RATE_LIMIT_PASSWORD_RESET_PER_IP", "10/h")
RATE_LIMIT_PASSWORD_RESET_PER_EMAIL = rate("RATE_LIMIT_PASSWORD_RESET_PER_EMAIL", "3/h")
# A reset link works once, for this long, and dies with any change of the password.
PASSWORD_RESET_TIMEOUT = 30 * 60
RATE_LIMIT_CAPTCHA_PER_IP = rate("RATE_LIMIT_CAPTCHA_PER_IP", "60/m")
RATE_LIMIT_CAPTCHA_VERIFY_PER_IP = rate("RATE_LIMIT_CAPTCHA_VERIFY_PER_IP", "20/m")
# A user's exports of their data (GET /api/user/export): each reads and zips all of it.
RATE_LIMIT_EXPORT_PER_USER = rate("RATE_LIMIT_EXPORT_PER_USER", "5/h")

# --- The second factor (TOTP, accounts/twofactor.py) -----------------------------------------
# Wrong codes (TOTP or recovery) a user may send, at login or to confirm or turn off the
# factor; past it every code is refused, a right one too, until the window ends. 10 an hour
# leaves a guesser, who must know the password already, years from a 6-digit code.
RATE_LIMIT_OTP_PER_USER = rate("RATE_LIMIT_OTP_PER_USER", "10/h")
# The issuer authenticator apps show beside the account (the otpauth:// URI's `issuer`).
TOTP_ISSUER = text("TOTP_ISSUER", "Relay")
# Staff without a confirmed second factor are kept out of the admin: its login answers a page
# that sends them to the console's account page to turn one on (relay.admin_signin). On
# outside DEBUG, so a production admin is never one stolen password away (issue 53).
REQUIRE_STAFF_2FA = boolean("REQUIRE_STAFF_2FA", not DEBUG)
