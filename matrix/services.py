"""The Matrix bot's writes asked for by a user, staff, the bot's /sync or core.events: a
user's room (consent first), and what the bot is to tell them. Each message is an outbox
row written with its task (matrix.tasks, which also sends it).

- Setting a Matrix id checks that it exists on its homeserver, then starts a room: an
  `invite` outbox row makes the direct room, saves its id at once, invites the user and
  lists the room in the bot's `m.direct`. Nothing else is sent before the user joins.
- `matrix_outbox_write` (a core.events outbox writer) turns a recorded inbound call or an
  outbound call's final state into one `m.notice` row, in the transaction of that state,
  when the user's room is joined and their switch is on. It makes no HTTP request: the call
  pipeline is never slowed by the homeserver.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import services as account_services
from accounts.models import User
from calls.models import Call
from calls.states import TERMINAL_STATES
from core import outbox, ratelimit
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from matrix import selectors, texts
from matrix.client import MatrixClient, MatrixError
from matrix.models import MatrixMessage, MatrixRoom, MessageKind, MessageStatus, RoomStatus
from matrix.tasks import (
    TRANSCRIPT_KEY,
    member_key,
    message_enqueue,
    room_end,
    room_status_set,
    schedule_message,
    token_recheck,
)

logger = logging.getLogger(__name__)


# --- the user's room -------------------------------------------------------------------------
def matrix_id_set(*, user: User, matrix_id: str | None) -> User:
    """Store the user's Matrix id (None clears it) and, when Matrix is on, start over with it:
    the room in use ends, and for a new id a room is made and the id invited, by the worker.

    The id must exist on its homeserver (its profile answers): InvalidRequest when it does
    not, ApplicationError `matrix_unavailable` when the homeserver cannot be asked, and
    RateLimited past RATE_LIMIT_MATRIX_ID_PER_USER new ids. Setting the id the user already
    has, while its room is invited or joined, changes nothing.
    """
    account_services.matrix_id_check(matrix_id=matrix_id)
    current = selectors.matrix_room_in_use(user=user)
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
        room_end(user=user, reason="the Matrix id changed" if matrix_id else "cleared")
        if settings.MATRIX_ENABLED and matrix_id is not None:
            room = MatrixRoom.objects.create(user=user, matrix_id=matrix_id)
            message_enqueue(room=room, kind=MessageKind.INVITE, key=f"invite:{room.pk}")
            room_status_set(user_id=user.pk, status=RoomStatus.INVITED)
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
            room_status_set(user_id=room.user_id, status=status)
    room.status = status
    logger.info("matrix room of user %s: %s", room.user_id, status)


# --- the outbox ------------------------------------------------------------------------------
def matrix_outbox_write(*, events: list[tuple], rows=None, owned=None, shared=False) -> None:
    """core.events' outbox writer: one notice for each inbound call recorded on one of the
    user's numbers, or final state of one of their outbound calls, in the caller's
    transaction, when Matrix is on, their room is joined and their switch is on. A call
    placed from the chat gets its final state in the command's thread instead. With
    `shared`, the calls are of a number shared with the user, who turned Matrix on for it:
    that switch is the one that counts, not their account's matrix_inbound (which is about
    their own numbers)."""
    if not settings.MATRIX_ENABLED:
        return
    for user_id, event in events:
        _notice_write(user_id, event, shared=shared)


def _notice_write(user_id, event: dict, *, shared: bool = False) -> None:
    kind = event.get("type")
    ended = kind == "call_status" and event.get("status") in TERMINAL_STATES
    if kind not in ("call_record", "call_record.transcribed", RECORDED) and not ended:
        return
    # A savepoint: whatever goes wrong here is logged and undone alone, and the call's own
    # transaction commits as if Matrix were off.
    try:
        with transaction.atomic():
            if ended:
                _outbound_ended(user_id, event)
            elif kind == "call_record":
                _inbound_recorded(user_id, event, shared=shared)
            elif kind == RECORDED:
                _call_recorded(user_id, event, shared=shared)
            else:
                _transcribed(user_id, event, shared=shared)
    except Exception:
        logger.exception("matrix: no notice queued for a %s of user %s", kind, user_id)


def _inbound_recorded(user_id, event: dict, *, shared: bool) -> None:
    _inbound_notice(
        user_id, event, key=f"inbound:{event['id']}", text=texts.inbound_call, shared=shared
    )


RECORDED = "recording.completed"


def _call_recorded(user_id, event: dict, *, shared: bool) -> None:
    """A bridged call's recording (issue 58): a notice when it was a call to a number (a
    script's dial on an outbound call has none: its owner has the call's own notice)."""
    if event.get("number"):
        key = f"recording:{event['id']}"
        _inbound_notice(user_id, event, key=key, text=texts.call_recording, shared=shared)


def _inbound_notice(user_id, event: dict, *, key: str, text, shared: bool) -> None:
    """A notice about a call to the user's numbers (`text(event)`), queued for their room
    when they have one joined and take such notices (matrix_inbound; for a number shared
    with them, their switch for it, which let the event reach this writer at all)."""
    room = selectors.room_joined(user_id=user_id)
    if room is None:
        return
    if shared:
        key = member_key(key, user_id)
    elif not User.objects.filter(pk=user_id, matrix_inbound=True).exists():
        return
    message_enqueue(
        room=room, kind=MessageKind.INBOUND, key=key, text=text(event), about=_about(event)
    )


def _about(event: dict) -> dict | None:
    """The call a notice is about (`org.relay.call`), as the frame names it."""
    if "call" not in event:
        return None
    return (
        {"call": event["call"], "seq": event["seq"]} if "seq" in event else {"call": event["call"]}
    )


def _transcribed(user_id, event: dict, *, shared: bool) -> None:
    """A voicemail's transcript, when there is one, after its call's notice."""
    if event.get("transcript_status") != "done" or not event.get("transcript"):
        return
    _inbound_notice(
        user_id,
        event,
        key=f"{TRANSCRIPT_KEY}{event['id']}",
        text=texts.transcript,
        shared=shared,
    )


def _outbound_ended(user_id, event: dict) -> None:
    call = Call.objects.filter(owner_id=user_id, call_id=event["callId"]).values("pk", "to").first()
    if call is None:
        return
    text = texts.outbound_call(
        to=call["to"],
        status=event["status"],
        duration=event.get("duration"),
        reason=event.get("reason", ""),
        answered_by=event.get("answeredBy", ""),
    )
    about = _about(event)
    ack = (
        MatrixMessage.objects.filter(key=_reply_key(event["callId"], "ack"), room__user_id=user_id)
        .select_related("room")
        .first()
    )
    if ack is not None:  # placed from the chat: the answer goes to the command's thread
        if ack.room.in_use and ack.room.status == RoomStatus.JOINED:
            reply_enqueue(
                room=ack.room,
                command_event_id=event["callId"],
                name="final",
                text=text,
                about=about,
            )
        return
    room = selectors.room_joined(user_id=user_id)
    if room is None or not User.objects.filter(pk=user_id, matrix_outbound=True).exists():
        return
    key = f"outbound:{call['pk']}"
    message_enqueue(room=room, kind=MessageKind.OUTBOUND, key=key, text=text, about=about)


def _reply_key(command_event_id: str, name: str) -> str:
    return f"reply:{name}:{command_event_id}"[:200]


def reply_enqueue(
    *,
    room: MatrixRoom,
    command_event_id: str,
    name: str,
    text: texts.Text,
    about: dict | None = None,
):
    """The bot's answer `name` (ack, final, help...) to a command, in the command's thread;
    once per command and name, however often the command is seen. `about`: the call it
    reports (matrix.texts.Text.content)."""
    return message_enqueue(
        room=room,
        kind=MessageKind.REPLY,
        key=_reply_key(command_event_id, name),
        text=text,
        thread_root=command_event_id,
        about=about,
    )


# --- staff and the worker's periodic pass ---------------------------------------------------
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


# --- account deletion ------------------------------------------------------------------------
def matrix_erase(*, user: User) -> None:
    """Account deletion (core.userdata): the Matrix link goes. The room in use ends (the bot
    leaves it, by the worker: the task carries the room id, not the row), and every room of
    the user is deleted with its messages. Inside the deletion's transaction."""
    room_end(user=user, reason="the account was deleted")
    MatrixRoom.objects.filter(user=user).delete()
