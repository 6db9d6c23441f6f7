"""Core: where runtime files live, development mode, the apps and middleware, the API's
framework and its OpenAPI document, static files, language and time."""

import importlib.metadata
from pathlib import Path

from relay.settings.readers import boolean, path

BASE_DIR = Path(__file__).resolve().parent.parent.parent

# Runtime files: the SQLite database, the embedded Redis socket, collected static files.
VAR_DIR = path("RELAY_VAR_DIR", BASE_DIR / "var").resolve()

DEBUG = boolean("DEBUG", False)

# Not "daphne": its app only imports Twisted and installs its reactor at every process's
# start (a fifth of a Django start's CPU in processes that serve no WebSocket) for a
# `runserver` Relay does not use; relay.platform.daphne_server imports daphne.server first,
# before Django, where the reactor is needed (docs/decisions.md).
INSTALLED_APPS = [
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
    "mail",  # the outbox of mail to users, sent by the worker
    "accounts",
    "virtual_numbers",
    "captcha",
    "calls",  # the call ledger: a call's states and the moves between them
    "history",
    "voiceapps",  # scripts of verbs a call runs, their hooks and TwiML
    "realtime",
    "telephony",
    "webhooks",
    "matrix",
    "console",  # pages for people, over the same services as the API
    "relay",  # the site itself: runrelay, the command that runs every process
]

MIDDLEWARE = [
    "relay.middleware.RequestIdMiddleware",
    "relay.middleware.AccessLogMiddleware",
    "relay.middleware.AllowedHostMiddleware",
    "relay.middleware.NoStoreMiddleware",
    "relay.middleware.BodySizeLimitMiddleware",
    "relay.middleware.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "relay.content_security_policy.ContentSecurityPolicyMiddleware",
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

HISTORY_MAX_LIMIT = 200

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
    "DEFAULT_SCHEMA_CLASS": "core.platform.schema.RelayAutoSchema",
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
        "CallStateEnum": "calls.states.CALL_STATE_VALUES",
    },
}

# --- Static files -----------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # created with VAR_DIR by RelayConfig.ready()
# Serve straight from the app folders too, so a checkout works before collectstatic has run.
WHITENOISE_USE_FINDERS = True

# --- Language and time ------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
