"""The Content-Security-Policy header: settings.CONTENT_SECURITY_POLICY on every response, its
connect-src widened to the socket's origin, and the admin's pages under a policy of their own
(settings.CONTENT_SECURITY_POLICY_ADMIN). docs/console.md says what each directive is for."""

from urllib.parse import urlsplit

from csp.middleware import CSPMiddleware, PolicyParts
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.urls import NoReverseMatch, reverse

from accounts.wsurl import ws_base_url


def socket_origin(request) -> str | None:
    """The origin of the URL the console's calls page opens its socket at (PUBLIC_WS_URL, or
    the one derived from the request as GET /api/dashboard derives it); None when the request
    names no host this site serves (AllowedHostMiddleware has answered it already)."""
    try:
        base = urlsplit(ws_base_url(request))
    except DisallowedHost:
        return None
    return f"{base.scheme}://{base.netloc.rpartition('@')[2]}"


def _in_admin(request) -> bool:
    """Whether `request` is for one of the admin's pages; never, under a URLconf without the
    admin (the bench's plain view)."""
    try:
        return request.path.startswith(reverse("admin:index"))
    except NoReverseMatch:
        return False


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, with the two things a fixed setting cannot say: the socket's
    origin, known only per request when PUBLIC_WS_URL is unset, and the admin's own policy.
    A view's own @csp/@csp_update/@csp_replace decorators still win, as django-csp has them."""

    def get_policy_parts(self, request, response, report_only=False) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if report_only:
            return parts
        if _in_admin(request):
            if parts.config is None:
                parts.config = settings.CONTENT_SECURITY_POLICY_ADMIN
            return parts
        origin = socket_origin(request)
        if origin is not None:
            update = dict(parts.update or {})
            update["connect-src"] = [*update.get("connect-src", []), origin]
            parts.update = update
        return parts
