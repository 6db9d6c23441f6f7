"""The Matrix bot's side of the worker: its tasks, their scheduling, and what one attempt at
an outbox row does; with the writes an attempt shares with matrix.services (ending a room,
queueing a row), which live here because a lost room is started over by the worker.

The worker sends each row with the row's own transaction id, so a retry never posts twice;
in order per room; retried with backoff and jitter (30 s to 1 h) for MATRIX_RETRY_HOURS;
after the server's own delay on a 429; a 403 forgets the room and starts over from the
invite; a 401 (the bot's token refused) holds every row, logged once, until the token works
again.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from accounts.models import User
from core import outbox
from core.db import create_unless_taken
from history.selectors import transcript_kept
from matrix import texts
from matrix.client import MatrixClient, MatrixError
from matrix.models import (
    MatrixBotState,
    MatrixMessage,
    MatrixRoom,
    MessageKind,
    MessageStatus,
    RoomStatus,
)

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)  # longer than one attempt can take (a few 10 s requests)
TOKEN_RECHECK = timedelta(seconds=60)  # how often a refused token is tried again


# --- the tasks -------------------------------------------------------------------------------
@task()
def deliver_matrix_message(message_id: int) -> None:
    message_attempt(message_id=message_id)


@task()
def leave_room(room_id: str) -> None:
    """The bot leaves a room no longer in use (best effort: a failure is only logged)."""
    try:
        MatrixClient().leave(room_id)
    except MatrixError as exc:
        logger.warning("matrix: could not leave an ended room: %s", exc)


def schedule_message(row: MatrixMessage) -> None:
    """Enqueue `row`'s attempt at its next_attempt_at, in the caller's transaction."""
    outbox.schedule(deliver_matrix_message, row, message_id=row.pk)


# --- the rows and rooms an attempt writes too -----------------------------------------------
def room_status_set(*, user_id, status: str) -> None:
    """`matrixStatus` as the API shows it (on the User, which accounts reads)."""
    User.objects.filter(pk=user_id).update(matrix_status=status)


def room_end(*, user: User, reason: str) -> None:
    """End the user's room in use: nothing more is sent there and nothing read from there;
    what it had waiting is dropped, and the bot leaves it (by the worker)."""
    room = MatrixRoom.objects.select_for_update().filter(user=user, ended_at__isnull=True).first()
    room_status_set(user_id=user.pk, status="none")
    if room is None:
        return
    room.ended_at, room.end_reason = timezone.now(), reason[:200]
    room.save(update_fields=["ended_at", "end_reason"])
    room.messages.filter(status=MessageStatus.PENDING).update(
        status=MessageStatus.DROPPED, last_error=f"the room ended: {reason}"[:300]
    )
    if room.room_id and settings.MATRIX_ENABLED:
        leave_room.enqueue(room_id=room.room_id)


TRANSCRIPT_KEY = "transcript:"  # + the record's id: a voicemail's transcript
# + a member's user id, after a notice's key: the member's own copy of a shared number's
# notice, in their room (keys are unique across rooms; the owner's key stays as it was).
MEMBER_KEY_SEPARATOR = "/"


def member_key(key: str, user_id) -> str:
    """The key of a member's own copy of the notice the owner's room gets as `key`."""
    return f"{key}{MEMBER_KEY_SEPARATOR}{user_id}"


def transcript_record_id(key: str) -> str:
    """The record's id in a transcript notice's key, the owner's or a member's."""
    return key[len(TRANSCRIPT_KEY) :].partition(MEMBER_KEY_SEPARATOR)[0]


def message_enqueue(
    *,
    room: MatrixRoom,
    kind: str,
    key: str,
    text: texts.Text | None = None,
    thread_root: str = "",
    about: dict | None = None,
) -> MatrixMessage | None:
    """An outbox row and its task, in the caller's transaction; None when a row with `key`
    exists (a command or event seen again). A savepoint keeps a concurrent duplicate from
    undoing the caller's own transaction."""
    if MatrixMessage.objects.filter(key=key).exists():
        return None
    row = create_unless_taken(
        MatrixMessage.objects.create,
        key=key,
        room=room,
        kind=kind,
        body=text.body if text else "",
        formatted_body=text.html if text else "",
        thread_root=thread_root,
        about=about,
    )
    if row is None:
        return None
    schedule_message(row)
    return row


# --- the bot's token --------------------------------------------------------------------------
def bot_state() -> MatrixBotState:
    state, _ = MatrixBotState.objects.get_or_create(pk=1)
    return state


def token_refused(exc: MatrixError) -> None:
    """The homeserver refused the bot's token: hold everything, and say so once (not once per
    message or per user)."""
    now = timezone.now()
    bot_state()
    if MatrixBotState.objects.filter(pk=1, token_refused_at__isnull=True).update(
        token_refused_at=now
    ):
        logger.error(
            "Matrix: the homeserver refused MATRIX_BOT_ACCESS_TOKEN (%s); nothing is sent "
            "until it accepts it again",
            exc,
        )


def token_recheck(client: MatrixClient | None = None) -> bool:
    """While the token is refused, try it again (at most every TOKEN_RECHECK); True once it
    works, after which the held rows are sent. Called by the sweep and the sync loop."""
    state = bot_state()
    if state.token_refused_at is None:
        return True
    if timezone.now() - state.token_refused_at < TOKEN_RECHECK:
        return False
    try:
        (client or MatrixClient()).whoami()
    except MatrixError as exc:
        MatrixBotState.objects.filter(pk=1).update(token_refused_at=timezone.now())
        if exc.status not in (401, 403):
            logger.warning("Matrix: could not check the bot's token: %s", exc)
        return False
    MatrixBotState.objects.filter(pk=1).update(token_refused_at=None)
    logger.warning("Matrix: the homeserver accepts the bot's token again")
    return True


# --- one attempt ----------------------------------------------------------------------------
def message_attempt(*, message_id: int) -> MatrixMessage | None:
    """Do one due outbox row, unless an earlier row of its room is still pending (that one
    schedules this after itself) or another worker holds it. Returns the row when tried."""
    if not outbox.claim(MatrixMessage.objects, message_id, lease=LEASE):
        return None
    now = timezone.now()
    row = MatrixMessage.objects.select_related("room").get(pk=message_id)
    earlier = MatrixMessage.objects.filter(
        room_id=row.room_id, status=MessageStatus.PENDING, id__lt=row.id
    ).exists()
    if earlier:
        MatrixMessage.objects.filter(pk=row.pk).update(lease_until=None)
        return None
    if bot_state().token_refused_at is not None:
        _hold(row, until=now + TOKEN_RECHECK, error="the homeserver refuses the bot's token")
        return row
    room = row.room
    if row.key.startswith(TRANSCRIPT_KEY) and not transcript_kept(transcript_record_id(row.key)):
        _finish(row, status=MessageStatus.DROPPED, error="the message was deleted")
        return row
    if not room.in_use or (row.kind != MessageKind.INVITE and room.status != RoomStatus.JOINED):
        _finish(row, status=MessageStatus.DROPPED, error=f"the room is {_room_state(room)}")
        return row
    client = MatrixClient()
    try:
        if row.kind == MessageKind.INVITE:
            _open_room(client, room)
        else:
            text = texts.Text(row.body, row.formatted_body)
            content = text.content(thread_root=row.thread_root, about=row.about)
            row.event_id = client.send_notice(room.room_id, row.txn_id, content)
    except MatrixError as exc:
        _failed(row, exc)
        return row
    _finish(row, status=MessageStatus.SENT)
    return row


def _room_state(room: MatrixRoom) -> str:
    return "ended" if not room.in_use else room.status


def _open_room(client: MatrixClient, room: MatrixRoom) -> None:
    """Make the direct room (saved at once), invite the user into it as a direct chat, and
    list it in the bot's m.direct. Each step may be repeated without harm."""
    if not room.room_id:
        room_id = client.create_direct_room()
        MatrixRoom.objects.filter(pk=room.pk, room_id="").update(room_id=room_id)
        room.refresh_from_db(fields=["room_id"])
    client.invite_direct(room.room_id, room.matrix_id)
    client.direct_rooms_add(room.matrix_id, room.room_id)
    MatrixRoom.objects.filter(pk=room.pk).update(invite_sent_at=timezone.now())


def _failed(row: MatrixMessage, exc: MatrixError) -> None:
    now = timezone.now()
    if exc.status == 401:
        token_refused(exc)
        _hold(row, until=now + TOKEN_RECHECK, error=str(exc), attempted=True)
    elif exc.status == 429:
        _hold(
            row,
            until=now + timedelta(seconds=exc.retry_after or 1.0),
            error=str(exc),
            attempted=True,
        )
    elif exc.status == 403 and row.kind != MessageKind.INVITE:
        _room_lost(row.room, exc)
        _finish(row, status=MessageStatus.DROPPED, error=f"the bot lost the room: {exc}")
    # A refusal that will not change (4xx), or a day of failing to reach the homeserver.
    elif not exc.unreachable or now - row.created_at >= timedelta(
        hours=settings.MATRIX_RETRY_HOURS
    ):
        _finish(row, status=MessageStatus.FAILED, error=str(exc))
    else:
        _hold(row, until=now + outbox.backoff(row.attempts + 1), error=str(exc), attempted=True)


def _room_lost(room: MatrixRoom, exc: MatrixError) -> None:
    """A 403 on send: the bot is no longer in the room (kicked, or the room is gone). Forget
    it and start over from the invite: a new room, and nothing sent until the user joins."""
    logger.warning("matrix room of user %s lost (%s); inviting again", room.user_id, exc)
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=room.user_id)
        if not MatrixRoom.objects.filter(pk=room.pk, ended_at__isnull=True).exists():
            return
        room_end(user=user, reason="the bot lost the room")
        fresh = MatrixRoom.objects.create(user=user, matrix_id=room.matrix_id)
        message_enqueue(room=fresh, kind=MessageKind.INVITE, key=f"invite:{fresh.pk}")
        room_status_set(user_id=user.pk, status=RoomStatus.INVITED)


def _hold(row: MatrixMessage, *, until, error: str, attempted: bool = False) -> None:
    """Try `row` again at `until`."""
    with transaction.atomic():
        MatrixMessage.objects.filter(pk=row.pk).update(
            attempts=row.attempts + (1 if attempted else 0),
            next_attempt_at=until,
            lease_until=None,
            last_error=error[:300],
        )
        row.refresh_from_db()
        schedule_message(row)


def _finish(row: MatrixMessage, *, status: str, error: str = "") -> None:
    """Record `row`'s end (sent, dropped or given up) and start the next of its room."""
    now = timezone.now()
    with transaction.atomic():
        blank = {"body": "", "formatted_body": ""} if row.key.startswith(TRANSCRIPT_KEY) else {}
        MatrixMessage.objects.filter(pk=row.pk).update(
            **blank,  # a transcript is the user's, in their room: no copy stays here
            status=status,
            attempts=row.attempts + (0 if status == MessageStatus.DROPPED else 1),
            lease_until=None,
            last_error=error[:300],
            event_id=row.event_id,
            sent_at=now if status == MessageStatus.SENT else None,
        )
        following = (
            MatrixMessage.objects.filter(room_id=row.room_id, status=MessageStatus.PENDING)
            .order_by("id")
            .first()
        )
        if following is not None:
            schedule_message(following)
