"""The one way events leave for sockets: after the transaction that caused them commits.

Every consumer joins `user.<id>` and `session.<id>`; services call these helpers, never the
channel layer directly, so nothing is pushed about a row that was rolled back.
"""

import logging
from functools import partial
from uuid import UUID

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def user_group(user_id: UUID | str) -> str:
    return f"user.{user_id}"


def session_group(session_id: UUID | str) -> str:
    return f"session.{session_id}"


def _send(group: str, message: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # the row is committed; a down channel layer must not undo the request
        logger.exception("could not push %s to %s", message.get("type"), group)


def send_on_commit(group: str, message: dict) -> None:
    transaction.on_commit(partial(_send, group, message), robust=True)


def send_to_user_on_commit(*, user_id: UUID | str, event: dict) -> None:
    """Deliver `event` (a client frame) to every socket of the user once the caller commits."""
    send_on_commit(user_group(user_id), {"type": "relay.event", "event": event})


def session_ended_on_commit(*, session_id: UUID | str) -> None:
    """Close every socket opened with a JWT of this session once the caller commits."""
    send_on_commit(session_group(session_id), {"type": "relay.session_ended"})
