"""The one way events leave for sockets: after the transaction that caused them commits.

Every consumer joins `user.<id>` and `session.<id>`; services call these helpers, never the
channel layer directly, so nothing is pushed about a row that was rolled back.
"""

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from uuid import UUID

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

Push = tuple[str, dict]  # (group, message)
_collector: contextvars.ContextVar[list[Push] | None] = contextvars.ContextVar(
    "event_collector", default=None
)


def user_group(user_id: UUID | str) -> str:
    return f"user.{user_id}"


def session_group(session_id: UUID | str) -> str:
    return f"session.{session_id}"


def api_key_group(user_id: UUID | str) -> str:
    """The sockets of this user opened with their API key (not a login session's JWT)."""
    return f"apikey.{user_id}"


def phone_group(user_id: UUID | str) -> str:
    """The user's sockets whose browser phone is on (a `phone` frame): rung by the agent."""
    return f"phone.{user_id}"


def call_group(call_id: UUID | str) -> str:
    """The telephony agent that holds a bridged call (the ledger's id: an inbound call, or
    a call placed from the browser), while it is bridged: told of a transfer asked for by
    the API or the browser phone (issue 58)."""
    return f"call.{call_id}"


def _send(group: str, message: dict) -> None:
    async_to_sync(send_collected)([(group, message)])


def send_on_commit(group: str, message: dict) -> None:
    collector = _collector.get()
    if collector is not None:
        transaction.on_commit(partial(collector.append, (group, message)), robust=True)
    else:
        transaction.on_commit(partial(_send, group, message), robust=True)


@contextmanager
def collected_into(pushes: list[Push] | None) -> Iterator[None]:
    """Within the block, what would be pushed after a commit is appended to `pushes` instead
    (still only once its transaction commits), for async code to push itself with
    `send_collected`. A WebSocket consumer calls a service on a thread: pushing from that
    thread would hop back to the event loop and wait there for Redis, holding the thread.
    A list per request keeps apart the pushes of several requests written in one
    transaction; None leaves pushing as it is outside the block."""
    if pushes is None:
        yield
        return
    token = _collector.set(pushes)
    try:
        yield
    finally:
        _collector.reset(token)


async def send_collected(pushes: list[Push]) -> None:
    """Push what `collected_into` gathered, in order, from async code (after the commit). The
    rows are committed: a push that fails is logged, never raised, since a down channel
    layer must not undo the request."""
    layer = get_channel_layer()
    if layer is None:
        return
    for group, message in pushes:
        try:
            await layer.group_send(group, message)
        except Exception:
            logger.exception("could not push %s to %s", message.get("type"), group)


async def send_collected_together(pushes: list[tuple[str, dict, str | None]]) -> None:
    """send_collected for the pushes of several writes at once (a batch of submits), each
    with the one channel of its group it need not reach (None: every one), because its sender
    sent it there in place. A channel layer that can (relay.platform.channel_layer's
    `group_send_together`) sends them all in a fixed number of round trips and leaves those
    channels out; any other sends each to its whole group, and its left-out channel drops it
    by the message's `origin`. Failures are logged, never raised, as send_collected's."""
    layer = get_channel_layer()
    if layer is None or not pushes:
        return
    together = getattr(layer, "group_send_together", None)
    if together is None:
        await send_collected([(group, message) for group, message, _channel in pushes])
        return
    try:
        await together(pushes)
    except Exception:
        logger.exception("could not push %s messages together", len(pushes))


# Writers of outbox rows (webhook deliveries, Matrix notifications): each is called with
# every user event inside the transaction that caused it, so its rows commit with the state
# they report or not at all. Apps above the kernel register theirs in AppConfig.ready().
# A writer takes the events of one write at once (a batch of submits has one per call), as
# (user id, event) pairs, so that it can read what it needs for all of them together; and,
# beside them (`rows`), the row each event reports when its sender has it in hand (the call
# of a `call_status`), or None, so that it need not read again what the sender just wrote.
#
# A writer may also name what it reads of each user whose events it writes, as a column of a
# query over users (`outbox_owner_column_register`): a sender that reads those users anyway
# (a batch of submits, before its transaction) reads the column in the same query, and hands
# the values to every writer as `owned` ({column name: {user id: value}}), so the writer need
# not read them again inside the transaction. A writer reads what `owned` does not hold.
OutboxWriter = Callable[..., None]  # writer(*, events, rows, owned)
_outbox_writers: list[OutboxWriter] = []
# The channel each writer delivers on, by which a member of a shared number turns it on for
# that number (virtual_numbers' NumberMember switches): the names outbox.register gives.
WEBHOOKS = "webhooks"
MATRIX = "matrix"
_writer_channels: dict[OutboxWriter, str] = {}
_owner_columns: dict[str, Callable[[], object]] = {}
Owned = dict[str, dict]  # column name -> {user id (str): the column's value}


def outbox_writer_register(writer: OutboxWriter, *, channel: str | None = None) -> None:
    """Have `writer(events=[(user_id, event), ...], rows=[row or None, ...], owned={...})`
    see every user event (once, however often an app registers it). With `channel` (WEBHOOKS,
    MATRIX), it also sees the events of a shared number for the members who turned that
    channel on, called with `shared=True` (send_to_members_on_commit)."""
    if writer not in _outbox_writers:
        _outbox_writers.append(writer)
    if channel is not None:
        _writer_channels[writer] = channel


def outbox_owner_column_register(name: str, column: Callable[[], object]) -> None:
    """Offer senders that read users anyway the column `column()` (an expression over the
    user's pk, such as a Subquery on OuterRef("pk")), handed back to writers as
    `owned[name]`."""
    _owner_columns[name] = column


def outbox_owner_column_names() -> list[str]:
    """The registered owner columns' names (outbox_owner_columns, without building them)."""
    return list(_owner_columns)


def outbox_owner_columns() -> dict[str, object]:
    """The registered owner columns, by name, to annotate a query over users with."""
    return {name: column() for name, column in _owner_columns.items()}


def send_to_user_on_commit(*, user_id: UUID | str, event: dict, row=None) -> None:
    """Deliver `event` (a client frame) to every socket of the user once the caller commits,
    and hand it to every outbox writer now, inside the caller's transaction (with `row`, the
    model instance it reports, when the caller has it). Call it inside the transaction that
    writes the state `event` reports."""
    send_to_users_on_commit([(user_id, event, None, row)])


def send_to_users_on_commit(deliveries: list[tuple], *, owned: Owned | None = None):
    """send_to_user_on_commit for the events of one write at once, each (user id, event,
    where to collect its push: a list for collected_into, or None, and the row it reports
    or None): every outbox writer sees them all in one call, with `owned`, the owner columns
    the sender read of these users (outbox_owner_columns), when it has them."""
    for writer in _outbox_writers:
        writer(
            events=[(user_id, event) for user_id, event, *_ in deliveries],
            rows=[row for *_, row in deliveries],
            owned=owned or {},
        )
    for user_id, event, pushes, _row in deliveries:
        with collected_into(pushes):
            send_on_commit(user_group(user_id), {"type": "relay.event", "event": event})


def send_to_members_on_commit(*, members: list[tuple], event: dict, row=None) -> None:
    """Deliver `event`, about a number shared with these users (issue 57), to every socket of
    each once the caller commits; and hand it now, inside the caller's transaction, to the
    outbox writer of each channel a member turned on for that number and to no other:
    `members` is [(user id, the channel names they turned on: WEBHOOKS, MATRIX)]. A writer
    registered without a channel (outbox_writer_register) never sees it. Writers are called
    with `shared=True`, so that one can tell a member's delivery from an owner's (the Matrix
    writer reads no account-wide switch for it: the member's switch for the number is it).
    The caller reads `members` in the transaction that writes the state `event` reports, so
    someone removed a moment before hears nothing."""
    for writer in _outbox_writers:
        channel = _writer_channels.get(writer)
        chosen = [user_id for user_id, channels in members if channel and channel in channels]
        if chosen:
            writer(
                events=[(user_id, event) for user_id in chosen],
                rows=[row] * len(chosen),
                owned={},
                shared=True,
            )
    for user_id, _channels in members:
        send_on_commit(user_group(user_id), {"type": "relay.event", "event": event})


def session_ended_on_commit(*, session_id: UUID | str) -> None:
    """Close every socket opened with a JWT of this session once the caller commits."""
    send_on_commit(session_group(session_id), {"type": "relay.session_ended"})


def api_key_replaced_on_commit(*, user_id: UUID | str) -> None:
    """Close every socket opened with this user's API key once the caller commits."""
    send_on_commit(api_key_group(user_id), {"type": "relay.session_ended"})
