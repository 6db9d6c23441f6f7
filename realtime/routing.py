from django.urls import path, re_path

from realtime.consumers import RelayConsumer, unknown_path

websocket_urlpatterns = [
    path("ws", RelayConsumer.as_asgi()),
    re_path(r"", unknown_path),  # any other path: closed with 4404 (docs/websocket.md)
]
