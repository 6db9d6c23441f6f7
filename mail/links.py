"""Where a mail's links point: PUBLIC_URL, or the origin of the request that caused the mail.

The request's host is one ALLOWED_HOSTS vouches for (AllowedHostMiddleware refuses others),
so a forged Host header cannot send a reset link to an attacker's site; behind a proxy that
rewrites the host, set PUBLIC_URL.
"""

from django.conf import settings


def public_base_url(request=None) -> str:
    """The console's origin, without a trailing slash: PUBLIC_URL when set, else the
    request's scheme and host; with neither (a management command), http://localhost."""
    if settings.PUBLIC_URL:
        return settings.PUBLIC_URL
    if request is None:
        return "http://localhost"
    return f"{request.scheme}://{request.get_host()}"


def public_url(path: str, request=None) -> str:
    """An absolute link to `path` (which starts with /) for a mail."""
    return f"{public_base_url(request)}{path}"
