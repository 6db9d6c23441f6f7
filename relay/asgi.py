"""ASGI entry point: HTTP to Django, WebSocket through origin check and JWT auth to realtime."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")
# Build Django first: the WebSocket stack imports models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from realtime.middleware import SocketAuthMiddleware, origin_validator  # noqa: E402
from realtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": origin_validator(SocketAuthMiddleware(URLRouter(websocket_urlpatterns))),
    }
)
