"""Where a browser or client opens the socket: shared by GET /api/dashboard and the console's
socket token (a module of its own, so the console imports no views module)."""

from django.conf import settings
from django.http.request import split_domain_port


def ws_base_url(request) -> str:
    """PUBLIC_WS_URL when set; else the request's own host, at WS_PORT when the socket server
    listens on a port of its own (runrelay), else at the request's port (a proxy routes /ws)."""
    if settings.PUBLIC_WS_URL:
        return settings.PUBLIC_WS_URL.rstrip("/")
    scheme = "wss" if request.is_secure() else "ws"
    host = request.get_host()
    if settings.WS_PORT:
        name, _port = split_domain_port(host)  # an IPv6 literal keeps its brackets
        host = f"{name}:{settings.WS_PORT}"
    return f"{scheme}://{host}"
