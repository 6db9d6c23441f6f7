import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.db import InterfaceError, OperationalError, close_old_connections
from redis.exceptions import RedisError

from accounts import selectors as accounts_selectors
from core import events, metrics, parsing
from core.errors import ApplicationError, DatabaseUnavailable, InvalidRequest
from realtime import pipeline, services
from realtime.phone import CONSULT_FRAMES, PHONE_FRAMES, Phone, ring_echo, rings_answer
from realtime.sequence import CallFrames

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
# Under Daphne, autobahn enforces the size itself (runrelay passes the limit) and closes
# with 1009; this check covers other ASGI servers.
CLOSE_TOO_BIG = 1009
# The channel layer (Redis) is unreachable: "try again later". Not 1013: under Daphne the
# application may only close with 1000 or 3000-4999 (autobahn); 4503 mirrors HTTP 503 as
# 4401 mirrors 401.
CLOSE_UNAVAILABLE = 4503
# A WebSocket handshake to any path but /ws (mirrors HTTP 404, as 4401 mirrors 401).
CLOSE_NOT_FOUND = 4404
MAX_FRAME_BYTES = 64 * 1024

# Submits are written by one thread of their own per process, with its own kept database
# connection, off the event loop and off the one thread Channels gives every other
# database_sync_to_async call. One, not several: the process is bound by its CPU (one GIL),
# and each batch pays its statements once, so what arrives while a batch is written is best
# written as the next batch, whole. With four threads, batches were a quarter the size and the
# CPU per ack grew with them (docs/benchmarks.md, issue 40).
SUBMIT_THREADS = 1
_submit_executor = ThreadPoolExecutor(max_workers=SUBMIT_THREADS, thread_name_prefix="submit")
# At most this many submits share a transaction (SQLite's statements take at most 32,766
# parameters, and one batch's lock should stay short).
BATCH_MAX = 100
# A socket's call frames read and not yet answered: past this many, its next frame is read
# once the oldest is answered (the client's frames then wait in its TCP window).
CALLS_IN_FLIGHT_MAX = BATCH_MAX


def _submit_batch(submits: list[services.Submit]) -> list[services.Outcome]:
    """On the submit thread: the batch, between the connection upkeep that
    database_sync_to_async does around a call."""
    close_old_connections()
    try:
        return services.calls_submit(submits=submits)
    finally:
        close_old_connections()


@dataclass(frozen=True)
class Enqueued:
    """A call frame in the batcher: its submit, the future its batch fills, and the channel
    of the socket that sent it, which sends the call's pushes to its own user in place."""

    submit: services.Submit
    done: asyncio.Future
    origin: str

    async def outcome(self) -> tuple:
        """(call, created, pushes), or the ApplicationError refusing the frame (raised), or
        the database's error (raised: nothing of its batch was written)."""
        outcome = await self.done
        if isinstance(outcome, ApplicationError):
            raise outcome
        return (*outcome, self.submit.pushes)

    def pushes_elsewhere(self) -> list[tuple[str, dict, str | None]]:
        """The call's pushes for every other socket (events.send_collected_together): what
        the sending socket sends in place (its user's events, RelayConsumer.send_ack) is
        marked with its `origin` and leaves its channel out."""
        user = self.submit.user
        return [
            (group, {**message, "origin": self.origin}, self.origin)
            if sent_in_place(group, message, user)
            else (group, message, None)
            for group, message in self.submit.pushes
        ]


def sent_in_place(group: str, message: dict, user) -> bool:
    """Whether a submit's push is sent by the submitting socket itself, beside its ack: an
    event for its own user's group."""
    return group == events.user_group(user.pk) and message.get("type") == "relay.event"


class SubmitBatcher:
    """The submits of every socket of this process, written together: while a batch is being
    written, what arrives waits, and goes as the next batch, in one transaction
    (realtime.services.calls_submit). A submit that finds the writer free goes at
    once, alone, so a quiet service adds no wait; under load, a batch costs about what one
    submit did, whatever its size."""

    def __init__(self) -> None:
        self.waiting: list[Enqueued] = []
        self.writing = 0  # batches on the threads

    def enqueue(self, *, user, data, origin: str, browser: bool = False) -> Enqueued:
        """Queue one call frame (`browser`: an rtc_offer frame) of the socket whose channel
        is `origin`, in the order frames arrive."""
        submit = services.Submit(user=user, data=data, pushes=[], browser=browser)
        enqueued = Enqueued(submit, asyncio.get_running_loop().create_future(), origin)
        self.waiting.append(enqueued)
        if self.writing < SUBMIT_THREADS:
            self._next_batch()
        return enqueued

    def _next_batch(self) -> None:
        batch, self.waiting = self.waiting[:BATCH_MAX], self.waiting[BATCH_MAX:]
        self.writing += 1
        task = asyncio.ensure_future(self._write(batch))
        _batches.add(task)
        task.add_done_callback(_batches.discard)

    async def _write(self, batch: list[Enqueued]) -> None:
        loop = asyncio.get_running_loop()
        metrics.call_submit_batch_size.observe(len(batch))
        pushes = []
        try:
            outcomes = await loop.run_in_executor(
                _submit_executor, _submit_batch, [enqueued.submit for enqueued in batch]
            )
        except Exception as exc:  # the database down: nothing of the batch was written
            for enqueued in batch:
                if not enqueued.done.done():
                    enqueued.done.set_exception(exc)
        else:
            for enqueued, outcome in zip(batch, outcomes, strict=True):
                if not enqueued.done.done():  # the socket may have gone meanwhile
                    enqueued.done.set_result(outcome)
                pushes += enqueued.pushes_elsewhere()
        finally:
            self.writing -= 1
            if self.waiting:
                self._next_batch()
        # The batch's pushes to other sockets, together, while the next batch is written and
        # the sending sockets ack theirs.
        await events.send_collected_together(pushes)


_batches: set[asyncio.Task] = set()  # held, so that a batch in flight is never collected
_answering: set[asyncio.Task] = set()  # the same for the tasks answering call frames
_batchers: dict[asyncio.AbstractEventLoop, SubmitBatcher] = {}


def _batcher() -> SubmitBatcher:
    """This event loop's batcher (one per Daphne process; each test's loop its own)."""
    loop = asyncio.get_running_loop()
    if loop not in _batchers:
        _batchers.clear()  # an old loop (tests) is done with
        _batchers[loop] = SubmitBatcher()
    return _batchers[loop]


@database_sync_to_async
def _credential_current(user, session) -> bool:
    """Whether the socket's credential still holds; True when the database cannot say (the
    handshake's authentication read it a moment ago: a database outage closes no socket)."""
    try:
        return accounts_selectors.credential_current(user=user, session=session)
    except (OperationalError, InterfaceError):
        logger.warning("could not check a socket's credential again: database unavailable")
        return True


@database_sync_to_async
def _browser_call_hang_up(user, call_id: str) -> None:
    services.browser_call_hang_up(user=user, call_id=call_id)


@database_sync_to_async
def _call_transfer(user, call_ref, frame: dict) -> dict:
    call, to = services.call_transfer(
        user=user, call_ref=str(call_ref), data={k: v for k, v in frame.items() if k == "to"}
    )
    reply = {"type": "call_transfer", "call": str(call.pk), "to": to, "status": "transferring"}
    if call.call_id:  # a call placed from the browser: the tab's own name of it too
        reply["callId"] = call.call_id
    return reply


@database_sync_to_async
def _call_consult(user, call_ref, frame: dict) -> tuple[str, str]:
    call, to = services.call_consult(
        user=user, call_ref=str(call_ref), data={k: v for k, v in frame.items() if k == "to"}
    )
    return str(call.pk), to


@database_sync_to_async
def _call_consult_decide(user, call_ref, *, complete: bool) -> str:
    call = services.call_consult_decide(user=user, call_ref=str(call_ref), complete=complete)
    return str(call.pk)


def now_ms() -> int:
    return int(time.time() * 1000)


def call_id_echo(frame) -> dict:
    """{"callId": ...} for an error frame, when the frame carried an acceptable one."""
    call_id = frame.get("callId") if isinstance(frame, dict) else None
    if isinstance(call_id, str) and parsing.text_problem(call_id) is None:
        return {"callId": call_id}
    return {}


class RelayConsumer(AsyncWebsocketConsumer):
    """`/ws`: one authenticated client socket (realtime.middleware authenticates it). Thin:
    parse, call a service, reply."""

    groups_joined: list[str]
    closed_unavailable = False
    accepted = False  # the handshake answered
    counted_open = False  # counted in relay_websocket_connections, until disconnect
    phone: Phone | None = None  # the browser phone's state, once authenticated
    frames: CallFrames  # each call's call_status frames in the order of their seq
    calls: deque  # the tasks answering the call frames in flight, oldest first (handle_call)

    async def __call__(self, scope, receive, send):
        # Losing the channel layer (Redis down, or an operation past its timeout) ends the
        # consumer with a RedisError, raised by a handler or by the channel-layer receive;
        # close the socket with "try again later" instead of a bare 1011, then leave the
        # groups if the layer still answers (each attempt is bounded).
        self.groups_joined = []
        self.calls = deque()
        self.frames = CallFrames()
        try:
            await super().__call__(scope, receive, send)
        except (RedisError, OSError) as exc:
            await self.close_unavailable(exc)
            await self.disconnect(CLOSE_UNAVAILABLE)
        finally:
            # However the consumer ends, an exception or a cancellation included, its socket
            # is no longer counted open.
            self.uncount()

    async def dispatch(self, message):
        # Channels' own dispatch first hops to its database thread to close old connections,
        # for every message: each frame, pong and pushed event paid a thread round trip. This
        # consumer never touches the database on the event loop; its database calls (a
        # batch of submits, the credential's recheck at connect) close old connections around
        # themselves, as database_sync_to_async does.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        # Tell the client at once, before channels unwinds the consumer (it cancels and awaits
        # the channel-layer receive): a socket that cannot reach the layer is never left open
        # and silent, whatever that unwinding does.
        try:
            await handler(message)
        except (RedisError, OSError) as exc:
            await self.close_unavailable(exc)
            raise

    async def close_unavailable(self, exc: BaseException) -> None:
        if self.closed_unavailable:
            return
        self.closed_unavailable = True
        logger.warning("closing a socket: channel layer unavailable (%s)", type(exc).__name__)
        with contextlib.suppress(Exception):  # the client may be gone already
            if not self.accepted:  # a handshake refused could not say why: accepted, then closed
                await self.base_send({"type": "websocket.accept"})
                self.accepted = True
            await self.base_send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE})

    async def connect(self):
        user, session = self.scope.get("user"), self.scope.get("login_session")
        request_id = self.scope.get("request_id")
        headers = [(b"x-request-id", request_id.encode())] if request_id else None
        if user is None or not user.is_authenticated:
            await self._accept(headers)
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        # The handshake completes once the socket is in its groups: a client whose socket has
        # opened misses no event sent after that. Ending the login session, or replacing the API
        # key, closes the socket it opened.
        credential_group = (
            events.session_group(session.pk) if session else events.api_key_group(user.pk)
        )
        for group in (events.user_group(user.pk), credential_group):
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        # Authenticated before joining: a logout (or a key replaced) in between was sent to the
        # group before this socket was in it. Asked again now that any later one reaches it.
        current = await _credential_current(user, session)
        await self._accept(headers)
        if not current:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.phone = Phone(layer=self.channel_layer, channel=self.channel_name, user_id=user.pk)
        self.counted_open = True
        metrics.websocket_connections.inc()
        logger.info("ws connect user=%s auth=%s", user.pk, "jwt" if session else "api_key")

    async def _accept(self, headers) -> None:
        await self.accept(headers=headers)
        self.accepted = True

    def uncount(self) -> None:
        if self.counted_open:
            self.counted_open = False
            metrics.websocket_connections.dec()

    async def disconnect(self, code):
        self.uncount()
        if self.phone is not None:
            with contextlib.suppress(RedisError, OSError):
                await self.phone.switch({"on": False})  # leaves its group and its rings
        for group in self.groups_joined:
            with contextlib.suppress(RedisError, OSError):  # the layer may be what failed
                await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = []

    async def receive(self, text_data=None, bytes_data=None):
        raw = text_data if text_data is not None else (bytes_data or b"")
        size = len(raw.encode() if isinstance(raw, str) else raw)
        if size > MAX_FRAME_BYTES:
            await self.close(code=CLOSE_TOO_BIG)
            return
        try:
            frame = parsing.loads(raw, what="frame")
        except ApplicationError as exc:
            # Refused like any bad field; a clean callId is still echoed for the client.
            await self.calls_answered()
            await self.send_error(exc, frame=getattr(exc, "document", None))
            return
        kind = frame.get("type") if isinstance(frame, dict) else None
        if kind in ("call", "rtc_offer") and not (kind == "rtc_offer" and rings_answer(frame)):
            if kind == "rtc_offer" and isinstance(frame.get("callId"), str):
                self.phone.offered.add(frame["callId"])
            await self.handle_call(frame, browser=kind == "rtc_offer")
            return
        # Any other frame is answered after the call frames before it.
        await self.calls_answered()
        if not isinstance(kind, str):
            await self.send_error(InvalidRequest("Frames must be JSON objects with a type."))
            return
        if kind == "ping":
            await self.send_json({"type": "pong", "ts": now_ms()})
            return
        if kind in PHONE_FRAMES:
            await self.on_phone(PHONE_FRAMES[kind], frame)
            return
        if kind == "rtc_hangup":
            await self.handle_hangup(frame)
            return
        if kind == "call_transfer":
            await self.handle_transfer(frame)
            return
        if kind in CONSULT_FRAMES:
            await self.handle_consult(kind, frame)
            return
        await self.send_error(InvalidRequest(f"Unknown frame type {kind[:32]!r}."))

    async def on_phone(self, handler, frame: dict) -> None:
        """A browser phone's frame, which `handler` (a method of realtime.phone.Phone) takes
        on this socket's phone: its answer, or its error frame."""
        await self.reply_or_error(frame, "phone", handler(self.phone, frame))

    async def reply_or_error(self, frame: dict, what: str, reply: Awaitable[dict | None]) -> None:
        """Sends what `reply` gives for `frame` (nothing for None), or the error frame of what
        it raises: an ApplicationError's own, database_unavailable (logged as a `what` frame's)
        when the database does not answer."""
        try:
            answer = await reply
        except ApplicationError as exc:
            await self.send_error(exc, frame=frame)
        except (OperationalError, InterfaceError) as exc:
            logger.warning("database unavailable for a %s frame: %s", what, type(exc).__name__)
            await self.send_error(DatabaseUnavailable(), frame=frame)
        else:
            if answer is not None:
                await self.send_json(answer)

    async def handle_hangup(self, frame: dict) -> None:
        """`rtc_hangup`: the tab leaves a ring (`ring`, or its deprecated callId), or ends its
        call from the browser (callId), as a cancel ends a call."""
        if "ring" in frame:
            await self.on_phone(Phone.hang_up, frame)
            return
        call_id = frame.get("callId")
        if not isinstance(call_id, str) or parsing.text_problem(call_id) is not None:
            await self.send_error(InvalidRequest("callId must be a string."), frame=frame)
            return
        if await self.phone.hang_up_ring(call_id):
            return  # a ring this tab declined, or its talk ended from the page
        await self.reply_or_error(
            frame, "hang-up", _browser_call_hang_up(self.scope["user"], call_id)
        )

    async def handle_transfer(self, frame: dict) -> None:
        """`call_transfer` (issue 58): `POST /api/calls/:call/transfer` as a frame, for the
        browser phone's Transfer button: `{"type": "call_transfer", "call", "to"}`, answered
        `{"type": "call_transfer", "call", "to", "status": "transferring"}` or an error frame
        (the API's codes; `ring` echoed when the frame names one). A call placed from this
        browser may be named by its `callId` instead of `call`."""
        call_ref = frame["call"] if "call" in frame else frame.get("callId")
        await self.reply_or_error(
            frame, "transfer", _call_transfer(self.scope["user"], call_ref, frame)
        )

    async def handle_consult(self, kind: str, frame: dict) -> None:
        """`call_consult`, `call_consult_complete` and `call_consult_cancel` (issue 58, an
        attended transfer from the browser phone): for a ring this socket took (`ring`, else
        not_found) of the inbound call `call` (not_found for anyone else's), checked by
        realtime.services, then passed to the agent of the ring, which tells the tab how it
        goes (docs/websocket.md). Answered `{"type": kind, "ring", "call", ...}` with
        `status` `consulting`, `completing` or `canceling`, or an error frame."""
        await self.reply_or_error(frame, "consult", self._consult(kind, frame))

    async def _consult(self, kind: str, frame: dict) -> dict:
        agent = self.phone.ring_agent(frame)
        user, call_ref = self.scope["user"], frame.get("call")
        if kind == "call_consult":
            call, to = await _call_consult(user, call_ref, frame)
            await self.phone.consult(agent, {"type": "rtc.consult", "to": to})
            reply = {"call": call, "to": to, "status": "consulting"}
        else:
            complete = kind == "call_consult_complete"
            call = await _call_consult_decide(user, call_ref, complete=complete)
            await self.phone.consult(agent, {"type": CONSULT_FRAMES[kind]})
            reply = {"call": call, "status": "completing" if complete else "canceling"}
        return {"type": kind, "ring": frame["ring"], **reply}

    async def handle_call(self, frame: dict, *, browser: bool = False) -> None:
        """A call frame: handed to the batcher at once, in arrival order, and answered by a
        task of its own, so that the socket's next frames are read (and batched) while it is
        written. Each task answers after the one before it: a socket's acks and error frames
        go in the order of its frames."""
        enqueued = _batcher().enqueue(
            user=self.scope["user"], data=frame, browser=browser, origin=self.channel_name
        )
        previous = self.calls[-1] if self.calls else None
        self.frames.owe(frame.get("callId"))
        task = asyncio.ensure_future(self.answer_call(frame, enqueued, previous))
        self.calls.append(task)
        _answering.add(task)  # held past the consumer: a socket closed meanwhile is still answered
        task.add_done_callback(_answering.discard)
        task.add_done_callback(self._call_answered)
        if len(self.calls) >= CALLS_IN_FLIGHT_MAX:
            await asyncio.wait({self.calls[0]})

    def _call_answered(self, _task: asyncio.Task) -> None:
        while self.calls and self.calls[0].done():
            self.calls.popleft()

    async def calls_answered(self) -> None:
        """Wait until every call frame read so far is answered."""
        if self.calls:
            await asyncio.wait({self.calls[-1]})

    async def answer_call(self, frame: dict, enqueued: Enqueued, previous) -> None:
        try:
            try:
                call, _created, pushes = await enqueued.outcome()
                refused = None
            except ApplicationError as exc:
                refused = exc
            except (OperationalError, InterfaceError) as exc:  # nothing of the batch written
                logger.warning("database unavailable for a call frame: %s", type(exc).__name__)
                refused = DatabaseUnavailable()
            if previous is not None:
                await asyncio.wait({previous})
            if refused is not None:
                await self.send_error(refused, frame=frame)
                return
            await self.send_ack(call, pushes)
        except (RedisError, OSError) as exc:
            await self.close_unavailable(exc)
        except Exception:
            # Not raised into Channels (this task is the socket's, not its dispatch's): the
            # socket stays open and the bug is logged.
            logger.exception("answering a call frame failed")
        finally:
            await self.answered(frame.get("callId"))

    async def answered(self, call_id) -> None:
        """The answer to a call frame of `call_id` is sent (or never will be): what the group
        brought of that call meanwhile goes now, after the ack and its `queued`."""
        for frame in self.frames.answered(call_id):
            try:
                await self.send_json(frame)
            except Exception:  # as answer_call: the socket's task, never raised into Channels
                logger.exception("sending a held call_status frame failed")
                return

    async def send_ack(self, call, pushes: list) -> None:
        # The call is committed (and its dispatch enqueued) before this ack leaves. Its
        # `queued` status follows on this socket at once, in this handler; what the agent
        # pushed about the call meanwhile (it may claim it within milliseconds: `dialing`)
        # was held by `relay_event` until this answer is sent (`answered`). The user's other
        # sockets get `queued` through the group, which marks it as this socket's own so
        # that `relay_event` does not send it here twice.
        await self.send_json(pipeline.call_ack_event(call))
        metrics.call_acks.labels("socket").inc()
        for group, message in pushes:
            if sent_in_place(group, message, self.scope["user"]):
                for frame in self.frames.in_place(message["event"]):
                    await self.send_json(frame)
        # The pushes for every other socket leave with the batch's (SubmitBatcher._write).

    async def send_json(self, payload: dict) -> None:
        await self.send(text_data=json.dumps(payload, separators=(",", ":")))

    async def send_error(self, error: ApplicationError, *, frame=None) -> None:
        """The error frame: the HTTP error body's code, message and fields, with the frame's
        callId and ring echoed when they are clean."""
        body = error.as_body()
        payload = {"type": "error", "code": body["code"], "error": body["error"]}
        payload.update(call_id_echo(frame))
        payload.update(ring_echo(frame))
        if "fields" in body:
            payload["fields"] = body["fields"]
        if "Retry-After" in error.headers:  # rate_limited, quota_exceeded, database_unavailable
            payload["retryAfter"] = int(error.headers["Retry-After"])
        await self.send_json(payload)

    # --- channel-layer handlers ---------------------------------------------------------------
    async def relay_event(self, message):
        if message.get("origin") == self.channel_name:
            return  # sent already, in its place (handle_call)
        if "peer" in message and self.phone is not None:  # an rtc_answer, with its agent
            self.phone.answered(message)
        if message["event"].get("type") == "call_status":
            # In the order of its numbers; held while this socket owes the call's ack
            # (realtime.sequence.CallFrames).
            for frame in self.frames.arrived(message["event"]):
                await self.send_json(frame)
            return
        await self.send_json(message["event"])

    async def rtc_probe(self, message):
        """An agent rings the owner's phones (telephony.webrtc.ring)."""
        frame = await self.phone.probed(message) if self.phone is not None else None
        if frame is not None:
            await self.send_json(frame)

    async def rtc_event(self, message):
        """A frame from the agent of a ring this socket is in: rtc_answer, rtc_hangup (one
        told to the owner's phone group, `ringing_only`, only while this socket is in it)."""
        frame = message["event"]
        if self.phone is not None:
            frame = self.phone.agent_said(message)
        if frame is None:
            return
        if message.get("ringing_only"):  # its rtc.ringing crossed the ring's close
            logger.info("%s: over before its agent heard this socket ring; told by the phone "
                        "group", frame.get("ring"))  # fmt: skip
        await self.send_json(frame)

    async def relay_session_ended(self, message):
        await self.close(code=CLOSE_UNAUTHENTICATED)


async def unknown_path(scope, receive, send):
    """Every WebSocket path but /ws: accepted and closed at once with 4404.

    Without it the router raised "No route found" and Daphne answered the handshake with
    HTTP 500. Refusing the handshake instead would reach the client as HTTP 403, which it
    could not tell apart from a refused Origin; a close code says "wrong address".
    """
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": CLOSE_NOT_FOUND})
