from django.urls import path

from realtime.consumers import RelayConsumer

websocket_urlpatterns = [path("ws", RelayConsumer.as_asgi())]
