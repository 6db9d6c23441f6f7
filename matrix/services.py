"""Every write of the Matrix bot: a user's room (consent first), the outbox of what the bot
sends, and its delivery by the worker.

- Setting a Matrix id checks that it exists on its homeserver, then starts a room: an
  `invite` outbox row makes the direct room, saves its id at once, invites the user and
  lists the room in the bot's `m.direct`. Nothing else is sent before the user joins.
- `matrix_outbox_write` (a core.events outbox writer) turns a recorded inbound call or an
  outbound call's final state into one `m.notice` row, in the transaction of that state,
  when the user's room is joined and their switch is on. It makes no HTTP request: the call
  pipeline is never slowed by the homeserver.
- The worker sends each row with the row's own transaction id, so a retry never posts twice;
  in order per room; retried with backoff and jitter (30 s to 1 h) for MATRIX_RETRY_HOURS;
  after the server's own delay on a 429; a 403 forgets the room and starts over from the
  invite; a 401 (the bot's token refused) holds every row, logged once, until the token works
  again.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_tasks import task

from accounts import services as account_services
from accounts.models import User
from core import outbox, ratelimit
from core.errors import ApplicationError, ErrorCode, InvalidRequest
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
from realtime.models import TERMINAL_STATES, CallRequest

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)  # longer than one attempt can take (a few 10 s requests)
TOKEN_RECHECK = timedelta(seconds=60)  # how often a refused token is tried again


# --- the user's room -------------------------------------------------------------------------
def matrix_id_set(*, user: User, matrix_id: str | None) -> User:
    """Store the user's Matrix id (None clears it) and, when Matrix is on, start over with it:
    the room in use ends, and for a new id a room is made and the id invited, by the worker.

    The id must exist on its homeserver (its profile answers): InvalidRequest when it does
    not, ApplicationError `matrix_unavailable` when the homeserver cannot be asked, and
    RateLimited past RATE_LIMIT_MATRIX_ID_PER_USER new ids. Setting the id the user already
    has, while its room is invited or joined, changes nothing.
    """
    account_services.matrix_id_check(matrix_id)
    current = matrix_room_in_use(user=user)
    if (
        matrix_id is not None
        and matrix_id == user.matrix_id
        and current is not None
        and current.status != RoomStatus.LEFT
    ):
        return user
    if settings.MATRIX_ENABLED and matrix_id is not None:
        # Each new id is a room and an invite, and the answer tells whether an id exists:
        # neither is for sending at speed.
        ratelimit.hit("matrix-id:user", str(user.pk), settings.RATE_LIMIT_MATRIX_ID_PER_USER)
        _check_exists(matrix_id)
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user.pk)
        account_services.user_matrix_id_set(user=user, matrix_id=matrix_id)
        _room_end(user=user, reason="the Matrix id changed" if matrix_id else "cleared")
        if settings.MATRIX_ENABLED and matrix_id is not None:
            room = MatrixRoom.objects.create(user=user, matrix_id=matrix_id)
            _enqueue(room=room, kind=MessageKind.INVITE, key=f"invite:{room.pk}")
            _status_set(user_id=user.pk, status=RoomStatus.INVITED)
    user.refresh_from_db()
    return user


def _check_exists(matrix_id: str) -> None:
    try:
        exists = MatrixClient().profile_exists(matrix_id)
    except MatrixError as exc:
        logger.warning("could not check a Matrix id on the homeserver: %s", exc)
        raise ApplicationError(
            "The Matrix homeserver could not be asked whether this id exists; try again.",
            code=ErrorCode.MATRIX_UNAVAILABLE,
            headers={"Retry-After": "30"},
        ) from None
    if not exists:
        raise InvalidRequest(
            "matrixId: no such Matrix user.",
            fields={"matrixId": ["No such user on its homeserver."]},
        )


def matrix_room_in_use(*, user: User) -> MatrixRoom | None:
    return MatrixRoom.objects.filter(user=user, ended_at__isnull=True).first()


def _status_set(*, user_id, status: str) -> None:
    """`matrixStatus` as the API shows it (on the User, which accounts reads)."""
    User.objects.filter(pk=user_id).update(matrix_status=status)


def _room_end(*, user: User, reason: str) -> None:
    """End the user's room in use: nothing more is sent there and nothing read from there;
    what it had waiting is dropped, and the bot leaves it (by the worker)."""
    room = MatrixRoom.objects.select_for_update().filter(user=user, ended_at__isnull=True).first()
    _status_set(user_id=user.pk, status="none")
    if room is None:
        return
    room.ended_at, room.end_reason = timezone.now(), reason[:200]
    room.save(update_fields=["ended_at", "end_reason"])
    room.messages.filter(status=MessageStatus.PENDING).update(
        status=MessageStatus.DROPPED, last_error=f"the room ended: {reason}"[:300]
    )
    if room.room_id and settings.MATRIX_ENABLED:
        leave_room.enqueue(room_id=room.room_id)


def room_membership_set(*, room: MatrixRoom, membership: str) -> None:
    """The invited user's membership changed (seen by the bot's /sync): joining is the
    consent; leaving (or refusing the invite, or a ban) stops every message."""
    status = {"join": RoomStatus.JOINED, "leave": RoomStatus.LEFT, "ban": RoomStatus.LEFT}.get(
        membership
    )
    if status is None or status == room.status:
        return
    with transaction.atomic():
        updated = MatrixRoom.objects.filter(pk=room.pk, ended_at__isnull=True).update(
            status=status, joined_at=timezone.now() if status == RoomStatus.JOINED else None
        )
        if updated:
            _status_set(user_id=room.user_id, status=status)
    room.status = status
    logger.info("matrix room of user %s: %s", room.user_id, status)


# --- the outbox ------------------------------------------------------------------------------
def matrix_outbox_write(*, events: list[tuple]) -> None:
    """core.events' outbox writer: one notice for each inbound call recorded on one of the
    user's numbers, or final state of one of their outbound calls, in the caller's
    transaction, when Matrix is on, their room is joined and their switch is on. A call
    placed from the chat gets its final state in the command's thread instead."""
    if not settings.MATRIX_ENABLED:
        return
    for user_id, event in events:
        _notice_write(user_id, event)


def _notice_write(user_id, event: dict) -> None:
    kind = event.get("type")
    ended = kind == "call_status" and event.get("status") in TERMINAL_STATES
    if kind != "call_record" and not ended:
        return
    # A savepoint: whatever goes wrong here is logged and undone alone, and the call's own
    # transaction commits as if Matrix were off.
    try:
        with transaction.atomic():
            if ended:
                _outbound_ended(user_id, event)
            else:
                _inbound_recorded(user_id, event)
    except Exception:
        logger.exception("matrix: no notice queued for a %s of user %s", kind, user_id)


def _inbound_recorded(user_id, event: dict) -> None:
    room = _joined_room(user_id)
    if room is None or not User.objects.filter(pk=user_id, matrix_inbound=True).exists():
        return
    text = texts.inbound_call(event)
    _enqueue(room=room, kind=MessageKind.INBOUND, key=f"inbound:{event['id']}", text=text)


def _outbound_ended(user_id, event: dict) -> None:
    call = (
        CallRequest.objects.filter(owner_id=user_id, call_id=event["callId"])
        .values("pk", "to")
        .first()
    )
    if call is None:
        return
    text = texts.outbound_call(
        to=call["to"],
        status=event["status"],
        duration=event.get("duration"),
        reason=event.get("reason", ""),
    )
    ack = (
        MatrixMessage.objects.filter(key=_reply_key(event["callId"], "ack"), room__user_id=user_id)
        .select_related("room")
        .first()
    )
    if ack is not None:  # placed from the chat: the answer goes to the command's thread
        if ack.room.in_use and ack.room.status == RoomStatus.JOINED:
            reply_enqueue(room=ack.room, command_event_id=event["callId"], name="final", text=text)
        return
    room = _joined_room(user_id)
    if room is None or not User.objects.filter(pk=user_id, matrix_outbound=True).exists():
        return
    _enqueue(room=room, kind=MessageKind.OUTBOUND, key=f"outbound:{call['pk']}", text=text)


def _joined_room(user_id) -> MatrixRoom | None:
    return MatrixRoom.objects.filter(
        user_id=user_id, ended_at__isnull=True, status=RoomStatus.JOINED
    ).first()


def _reply_key(command_event_id: str, name: str) -> str:
    return f"reply:{name}:{command_event_id}"[:200]


def reply_enqueue(*, room: MatrixRoom, command_event_id: str, name: str, text: texts.Text):
    """The bot's answer `name` (ack, final, help...) to a command, in the command's thread;
    once per command and name, however often the command is seen."""
    return _enqueue(
        room=room,
        kind=MessageKind.REPLY,
        key=_reply_key(command_event_id, name),
        text=text,
        thread_root=command_event_id,
    )


def _enqueue(
    *,
    room: MatrixRoom,
    kind: str,
    key: str,
    text: texts.Text | None = None,
    thread_root: str = "",
) -> MatrixMessage | None:
    """An outbox row and its task, in the caller's transaction; None when a row with `key`
    exists (a command or event seen again). A savepoint keeps a concurrent duplicate from
    undoing the caller's own transaction."""
    if MatrixMessage.objects.filter(key=key).exists():
        return None
    try:
        with transaction.atomic():
            row = MatrixMessage.objects.create(
                key=key,
                room=room,
                kind=kind,
                body=text.body if text else "",
                formatted_body=text.html if text else "",
                thread_root=thread_root,
            )
    except IntegrityError:
        return None
    schedule_message(row)
    return row


# --- delivery, in the worker -----------------------------------------------------------------
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
    if not room.in_use or (row.kind != MessageKind.INVITE and room.status != RoomStatus.JOINED):
        _finish(row, status=MessageStatus.DROPPED, error=f"the room is {_room_state(room)}")
        return row
    client = MatrixClient()
    try:
        if row.kind == MessageKind.INVITE:
            _open_room(client, room)
        else:
            content = texts.Text(row.body, row.formatted_body).content(thread_root=row.thread_root)
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
        _room_end(user=user, reason="the bot lost the room")
        fresh = MatrixRoom.objects.create(user=user, matrix_id=room.matrix_id)
        _enqueue(room=fresh, kind=MessageKind.INVITE, key=f"invite:{fresh.pk}")
        _status_set(user_id=user.pk, status=RoomStatus.INVITED)


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
        MatrixMessage.objects.filter(pk=row.pk).update(
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


def message_retry(*, row: MatrixMessage) -> None:
    """Staff: try a row again now (a given-up or dropped one too)."""
    with transaction.atomic():
        MatrixMessage.objects.filter(pk=row.pk).update(
            status=MessageStatus.PENDING, next_attempt_at=timezone.now(), lease_until=None
        )
        row.refresh_from_db()
        schedule_message(row)


def messages_sweep() -> int:
    """The worker's periodic pass: while the bot's token is refused, try it again; then
    re-queue pending rows that are due (by more than a minute) and not held: their task was
    lost. Returns how many were re-queued. A duplicate task does nothing."""
    if not settings.MATRIX_ENABLED:
        return 0
    if not token_recheck():
        return 0
    return outbox.sweep(MatrixMessage.objects, schedule_message)


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
    due = deliver_matrix_message
    if row.next_attempt_at > timezone.now():
        due = deliver_matrix_message.using(run_after=row.next_attempt_at)
    due.enqueue(message_id=row.pk)
