"""What only the serving processes need of the settings (runrelay, gunicorn through
relay.gunicorn_conf, Daphne through relay.platform.daphne_server), checked as each starts: an
operator command such as `manage.py provision_numbers` mails no link and needs none of it."""

from django.conf import settings

from relay.settings.readers import must


def serving_settings_check() -> None:
    """ImproperlyConfigured, in one line, unless PUBLIC_URL is set or DEBUG is on.

    Without PUBLIC_URL a mailed link (a password reset, an address to verify) is built from
    the Host header of the request that asked for it. ALLOWED_HOSTS vouches for that host, but
    every name it lists then mints links: a link for a name people do not reach Relay by is
    at best dead and at worst someone else's site (issue 53)."""
    must(
        settings.PUBLIC_URL or settings.DEBUG,
        "PUBLIC_URL is not set. Set it to where people reach Relay, such as "
        "https://relay.example.com: every link Relay mails (password resets, address checks) "
        "starts with it. `make run` sets it to http://HOST:PORT; DEBUG=true lets it be "
        "absent for development.",
    )
