import asyncio
import logging

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import JsonResponse

logger = logging.getLogger(__name__)

CHECK_TIMEOUT = 2.0


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        logger.warning("healthz: database check failed", exc_info=True)
        return False


async def _channel_layer_ok() -> bool:
    """A real round trip: send to a fresh channel and read it back.

    The channel has the layer's default prefix, the one every socket's channel has: with
    channels-redis one receiver at a time pops for all process-local channels of a prefix,
    so an idle socket's receive delivers this message too. Under a prefix of its own the
    check waited behind that idle receive and reported 503 while Redis was fine.
    asyncio.timeout, not wait_for, which on Python 3.11 can swallow a cancellation.
    """
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        channel = await layer.new_channel()
        async with asyncio.timeout(CHECK_TIMEOUT):
            await layer.send(channel, {"type": "healthz"})
        async with asyncio.timeout(CHECK_TIMEOUT):
            message = await layer.receive(channel)
        return message.get("type") == "healthz"
    except Exception:
        logger.warning("healthz: channel layer check failed", exc_info=True)
        return False


async def healthz(request):
    database = await sync_to_async(_database_ok, thread_sensitive=True)()
    channel_layer = await _channel_layer_ok()
    body = {
        "status": "ok" if database and channel_layer else "unavailable",
        "database": "ok" if database else "unavailable",
        "channelLayer": "ok" if channel_layer else "unavailable",
    }
    return JsonResponse(body, status=200 if database and channel_layer else 503)
