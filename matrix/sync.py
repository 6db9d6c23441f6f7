"""The bot's reading side: /sync long-polling, memberships and chat commands.

Runs in `manage.py matrix_bot` (a worker-side process; never in a web or socket server). Each
batch's events are handled, then its `next_batch` is stored: a bot that dies in between sees
the batch again on restart, and handling it twice changes nothing (a command's callId is its
event id, and each reply is an outbox row unique per command), so a restart neither replays
nor skips a command.

Only the rooms in use are read, and in them only the invited user's own membership and
messages: the rest of the world (other rooms, other senders, invites to other rooms) is
ignored.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from calls.models import Call, Direction
from core.errors import ApplicationError
from matrix import services, tasks, texts
from matrix.client import MatrixClient, MatrixError
from matrix.models import MatrixBotState, MatrixRoom, RoomStatus
from realtime.services import call_submit

logger = logging.getLogger(__name__)

RECENT_CALLS = 5


def sync_once(*, client: MatrixClient, timeout_ms: int) -> dict:
    """One /sync from where the bot stopped, handled, and its next_batch stored. The first
    sync of a new bot takes the rooms' memberships as they are but runs no command from
    before it started. MatrixError when the homeserver fails (a 401 also holds the outbox)."""
    state = tasks.bot_state()
    try:
        response = client.sync(since=state.next_batch, timeout_ms=timeout_ms)
    except MatrixError as exc:
        if exc.status == 401:
            tasks.token_refused(exc)
        raise
    sync_handle(response, commands=bool(state.next_batch))
    MatrixBotState.objects.filter(pk=1).update(
        next_batch=str(response.get("next_batch", ""))[:500], updated_at=timezone.now()
    )
    return response


def sync_handle(response: dict, *, commands: bool = True) -> None:
    """Handle one /sync answer: memberships first (state, then timeline, in order), and
    commands in timeline order when `commands`."""
    joined = response.get("rooms", {}).get("join", {})
    if not isinstance(joined, dict):
        return
    for room_id, content in joined.items():
        room = (
            MatrixRoom.objects.filter(room_id=room_id, ended_at__isnull=True)
            .select_related("user")
            .first()
        )
        if room is None or not isinstance(content, dict):
            continue
        timeline = content.get("timeline") or {}
        if timeline.get("limited") and commands:
            logger.warning(
                "matrix: a gap in the room of user %s; commands in it unseen", room.user_id
            )
        events = _events(content.get("state")) + _events(timeline)
        for event in events:
            _handle_event(room, event, commands=commands)


def _events(section) -> list[dict]:
    if not isinstance(section, dict):
        return []
    return [event for event in section.get("events") or [] if isinstance(event, dict)]


def _handle_event(room: MatrixRoom, event: dict, *, commands: bool) -> None:
    kind, content = event.get("type"), event.get("content")
    if not isinstance(content, dict):
        return
    if kind == "m.room.member" and event.get("state_key") == room.matrix_id:
        membership = content.get("membership")
        if isinstance(membership, str):
            services.room_membership_set(room=room, membership=membership)
    elif kind == "m.room.message" and commands:
        # Only the user the room was made for, and only once they joined; never an edit.
        if event.get("sender") != room.matrix_id or room.status != RoomStatus.JOINED:
            return
        relates = content.get("m.relates_to")
        if isinstance(relates, dict) and relates.get("rel_type") == "m.replace":
            return
        body, event_id = content.get("body"), event.get("event_id")
        if isinstance(body, str) and isinstance(event_id, str):
            command_run(room=room, event_id=event_id, body=body)


def command_run(*, room: MatrixRoom, event_id: str, body: str) -> None:
    """Run the chat command in `body` (sent by the room's user as event `event_id`); anything
    that is not a command is ignored. The answer goes to the command's thread."""
    word, rest = _split(body)
    if word == "!call":
        _place_call(room, event_id, rest)
    elif word == "!help":
        with transaction.atomic():
            services.reply_enqueue(
                room=room, command_event_id=event_id, name="help", text=texts.help_text()
            )
    elif word == "!calls":
        recent = list(
            Call.objects.filter(owner_id=room.user_id, direction=Direction.OUTBOUND).order_by(
                "-created_at", "-id"
            )[:RECENT_CALLS]
        )
        with transaction.atomic():
            services.reply_enqueue(
                room=room,
                command_event_id=event_id,
                name="calls",
                text=texts.recent_calls(recent),
            )


MACHINE_DETECTION_OPTION = "--machine-detection="


def _place_call(room: MatrixRoom, event_id: str, rest: str) -> None:
    """`!call [--machine-detection=<mode>] <to> <message>`: through the same service as the
    WebSocket (its validation, rate limit, dialing policy, quotas and idempotency: the event id
    is the callId), acked in the thread in the call's own transaction. The mode is checked
    there too: a wrong one is refused naming machineDetection."""
    data = {"callId": event_id}
    word, after = _split(rest)
    if word.startswith(MACHINE_DETECTION_OPTION):
        data["machineDetection"] = word.removeprefix(MACHINE_DETECTION_OPTION)
        rest = after
    to, message = _split(rest)
    data |= {"to": to, "message": message}

    def ack(call: Call) -> None:
        services.reply_enqueue(
            room=room,
            command_event_id=event_id,
            name="ack",
            text=texts.call_queued(to=call.to, call_id=call.call_id),
            about={"call": str(call.pk)},  # as its call_ack names it
        )

    try:
        call, created = call_submit(user=room.user, data=data, also=ack)
    except ApplicationError as refused:
        with transaction.atomic():
            services.reply_enqueue(
                room=room, command_event_id=event_id, name="refused", text=_refusal(refused)
            )
        return
    if not created:  # the command seen again: its ack is sent once (reply_enqueue's key)
        with transaction.atomic():
            ack(call)


def _split(text: str) -> tuple[str, str]:
    """The first word of `text` and the rest, at any whitespace (a client may send a newline
    or several spaces), the rest trimmed."""
    parts = text.split(maxsplit=1)
    if not parts:
        return "", ""
    return parts[0], parts[1].strip() if len(parts) > 1 else ""


def _refusal(error: ApplicationError) -> texts.Text:
    if error.fields:
        details = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in error.fields.items())
        return texts.refused(f"{details} (usage: !call +442079460123 Hello)")
    return texts.refused(error.message)
