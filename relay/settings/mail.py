"""Mail (docs/operations.md, "Mail"): how Relay sends it, from whom, and how hard it tries.

Mail is written to the outbox (the `mail` app) in the transaction of what it reports and sent
by the task worker, never inside a request. EMAIL_URL picks the transport:

- `smtp://user:password@host:587`: SMTP with STARTTLS (`?starttls=false` for a relay on the
  same host that speaks no TLS);
- `smtps://user:password@host:465`: SMTP over TLS from the first byte;
- `console:`: each mail printed, links included, to the worker's standard output (`make run`);
- `file:///path/to/folder`: each mail a file in that folder.

dj-email-url reads `smtps://` as STARTTLS and drops the leading slash of a `file://` path, so
this module reads the URL itself (docs/decisions.md, "Mail").
"""

from urllib.parse import parse_qs, unquote, urlsplit

from relay.settings.readers import must, readable_file, seconds, text, whole_number

SMTP_BACKEND = "mail.backends.SmtpBackend"
_BACKENDS = {
    "smtp": SMTP_BACKEND,
    "smtps": SMTP_BACKEND,
    "console": "django.core.mail.backends.console.EmailBackend",
    "file": "django.core.mail.backends.filebased.EmailBackend",
}
_DEFAULT_PORTS = {"smtp": 587, "smtps": 465}


def email_transport(url: str) -> dict:
    """Django's EMAIL_* settings for an EMAIL_URL; ValueError for a URL it cannot take."""
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme not in _BACKENDS:
        raise ValueError(url)
    config = {"EMAIL_BACKEND": _BACKENDS[scheme], "EMAIL_FILE_PATH": None}
    if scheme == "file":
        if not parts.path.startswith("/"):
            raise ValueError(url)
        config["EMAIL_FILE_PATH"] = unquote(parts.path)
    if scheme in _DEFAULT_PORTS:
        if not parts.hostname:
            raise ValueError(url)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        starttls = query.get("starttls", "true")
        if starttls not in ("true", "false") or set(query) - {"starttls"}:
            raise ValueError(url)
        config.update(
            EMAIL_HOST=parts.hostname,
            EMAIL_PORT=parts.port or _DEFAULT_PORTS[scheme],
            EMAIL_HOST_USER=unquote(parts.username or ""),
            EMAIL_HOST_PASSWORD=unquote(parts.password or ""),
            EMAIL_USE_SSL=scheme == "smtps",
            EMAIL_USE_TLS=scheme == "smtp" and starttls == "true",
        )
    return config


def _email_url() -> dict:
    # Not readers.parsed: its message repeats the value, and this one may hold a password.
    try:
        return email_transport(text("EMAIL_URL", "console:"))
    except ValueError:
        must(
            False,
            "EMAIL_URL must be smtp://[user:password@]host[:port][?starttls=false], "
            "smtps://[user:password@]host[:port], console: or file:///folder",
        )
        raise


_transport = _email_url()
EMAIL_BACKEND = _transport["EMAIL_BACKEND"]
EMAIL_FILE_PATH = _transport["EMAIL_FILE_PATH"]
EMAIL_HOST = _transport.get("EMAIL_HOST", "localhost")
EMAIL_PORT = _transport.get("EMAIL_PORT", 25)
EMAIL_HOST_USER = _transport.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = _transport.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _transport.get("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _transport.get("EMAIL_USE_SSL", False)
# A CA bundle to trust for the SMTP server's certificate (a private CA) instead of the
# system's; the server's name is checked either way.
EMAIL_CA_FILE = readable_file("EMAIL_CA_FILE")
EMAIL_TIMEOUT = seconds("EMAIL_TIMEOUT", 10.0, above=True, maximum=300)

EMAIL_FROM = text("EMAIL_FROM", "Relay <relay@localhost>")
must("@" in EMAIL_FROM and "\n" not in EMAIL_FROM, "EMAIL_FROM must be an e-mail address")
DEFAULT_FROM_EMAIL = SERVER_EMAIL = EMAIL_FROM
# Where a person who lost their second factor writes to the service's staff (the mails of a
# password reset say so): the sender's address unless the operator names another.
SUPPORT_EMAIL = text("SUPPORT_EMAIL", EMAIL_FROM)
must("@" in SUPPORT_EMAIL and "\n" not in SUPPORT_EMAIL, "SUPPORT_EMAIL must be an e-mail address")
# Tries of one mail before it is given up (backoff between them: 30 s, 1 min, 2 min, ...).
MAIL_MAX_ATTEMPTS = whole_number("MAIL_MAX_ATTEMPTS", 8, maximum=50)
