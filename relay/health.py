import asyncio
import logging
import uuid

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

    The channel is a plain one (no "!"), read by a pop of its own. A process-specific
    channel, a socket's kind, is read by the process's one receiving task
    (relay.platform.channel_layer), which lives on one event loop: under gunicorn each request's
    check runs on a loop of its own thread, and two checks at once said "Two event loops
    are trying to receive() on one channel layer" and 503. A plain channel also never
    waits behind an idle socket's receive.
    asyncio.timeout, not wait_for, which on Python 3.11 can swallow a cancellation.
    """
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        channel = f"healthz.{uuid.uuid4().hex}"
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
