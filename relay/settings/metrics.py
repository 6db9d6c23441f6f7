"""Metrics and logs: the Prometheus endpoint, and what the processes log and how."""

import logging

from relay.settings.base import VAR_DIR
from relay.settings.database import EMBEDDED_DATABASE
from relay.settings.readers import choice, must, path, text

# /metrics (Prometheus) wants `Authorization: Bearer <METRICS_TOKEN>`; unset, it is a 404.
# The embedded default reads the token `make run` generated into var/metrics_token, as it
# reads its secret key. runrelay points every process at PROMETHEUS_MULTIPROC_DIR (default
# var/metrics) so that the scrape sums them all (docs/operations.md, "Metrics").
METRICS_TOKEN_FILE = VAR_DIR / "metrics_token"
METRICS_TOKEN = text("METRICS_TOKEN")
if not METRICS_TOKEN and EMBEDDED_DATABASE and METRICS_TOKEN_FILE.exists():
    METRICS_TOKEN = METRICS_TOKEN_FILE.read_text().strip()
must(
    not METRICS_TOKEN or len(METRICS_TOKEN) >= 16,
    "METRICS_TOKEN must be at least 16 characters (or unset).",
)
METRICS_DIR = path("PROMETHEUS_MULTIPROC_DIR", VAR_DIR / "metrics")

# The level names logging's configuration takes (a lower-case or unknown name would stop the
# first process that configures logging, with a traceback).
LOG_LEVEL = choice("LOG_LEVEL", "INFO", logging.getLevelNamesMapping())
# plain: one line of text per record; json: one JSON object per line (relay.logging).
LOG_FORMAT = choice("LOG_FORMAT", "plain", ("plain", "json"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "control_characters": {"()": "relay.logging.ControlCharactersFilter"},
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
            "filters": ["control_characters", "redact", "request_id"],
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
        # aioice logs each ICE candidate pair's every state at INFO: a dozen lines a browser
        # call, each with the browser's addresses, and a tenth of the agent's CPU per call
        # (docs/benchmarks.md, sip_browser_50). The agent logs the call's outcome itself.
        "aioice": {"level": "WARNING"},
        "aiortc": {"level": "WARNING"},
    },
}
