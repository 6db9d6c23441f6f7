"""RFC 3261 §17's four transactions, with RFC 6026's Accepted state, as pure state machines.

A transaction takes events (a message received, a message the TU sends through it, a timer
fired, a transport error) and returns actions (transmit this message, start or stop a timer,
tell the TU this, terminated). It does no I/O and reads no clock, the way h11 keeps HTTP/1.1:
`ua.TransactionDriver` runs each one on the agent's loop (a `call_later` handle per timer, the
transport for what it transmits), and tests/telephony/test_transaction.py runs them on a fake
clock, without a socket and without sleeping.

The timers are named as §17 and RFC 6026 name them, as functions of T1, T2 and T4 (§17.1.1.1
and Table 4). Timer C is a proxy's (§16.6); a user agent never starts it. Two waits that RFC
3261 gives the TU, and names no timer for, are kept here as well, so that no timer is written
anywhere else: the 2xx an INVITE server transaction resends until its ACK comes (§13.3.1.4;
PJSIP and Doubango keep that in the transaction too), and how long a canceled INVITE waits for
its final response (§9.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from telephony.sip.message import Message, response_to

MAGIC_COOKIE = "z9hG4bK"  # §8.1.1.7: a branch that starts with it is unique


@dataclass(frozen=True)
class Timers:
    """T1, T2 and T4 in seconds, with Table 4's defaults. T1 is "an estimate of the
    round-trip time (RTT)", T2 "the maximum retransmit interval for non-INVITE requests and
    INVITE responses", T4 the "maximum duration a message will remain in the network"."""

    t1: float = 0.5
    t2: float = 4.0
    t4: float = 5.0


class Timer(StrEnum):
    A = "A"
    B = "B"
    D = "D"
    E = "E"
    F = "F"
    G = "G"
    H = "H"
    I = "I"  # noqa: E741 - RFC 3261's name for it
    J = "J"
    K = "K"
    L = "L"
    M = "M"
    ANSWER = "2xx"  # §13.3.1.4: the 2xx resent until its ACK
    CANCEL = "cancel"  # §9.1: a canceled INVITE's wait for its final response


# --- the timers (Table 4), as functions of T1, T2 and T4 ------------------------------------------
def _doubling(t: Timers, transmissions: int) -> float:
    # T1 after the first transmission, doubling after each one since.
    return t.t1 * 2 ** (transmissions - 1)


def timer_a(t: Timers, transmissions: int = 1) -> float:
    """The INVITE resent, over an unreliable transport: T1, then doubling (§17.1.1.2)."""
    return _doubling(t, transmissions)


def timer_b(t: Timers) -> float:
    """How long an INVITE client transaction waits for any response: 64*T1."""
    return 64 * t.t1


def timer_d(t: Timers, *, reliable: bool) -> float:
    """How long a completed INVITE client transaction absorbs its final response resent:
    "at least 32 seconds for unreliable transports, and ... zero seconds for reliable"."""
    return 0.0 if reliable else 32.0


def timer_e(t: Timers, transmissions: int = 1, *, proceeding: bool = False) -> float:
    """A non-INVITE request resent, over an unreliable transport: T1, doubling up to T2; T2
    once a provisional response has come (§17.1.2.2)."""
    return t.t2 if proceeding else min(_doubling(t, transmissions), t.t2)


def timer_f(t: Timers) -> float:
    """How long a non-INVITE client transaction waits for its final response: 64*T1."""
    return 64 * t.t1


def timer_g(t: Timers, transmissions: int = 1) -> float:
    """An INVITE's final response resent, over an unreliable transport: T1, doubling up to
    T2 (§17.2.1). §13.3.1.4 resends a 2xx on the same schedule."""
    return min(_doubling(t, transmissions), t.t2)


def timer_h(t: Timers) -> float:
    """How long an INVITE server transaction waits for the ACK of its 3xx-6xx: 64*T1."""
    return 64 * t.t1


def timer_i(t: Timers, *, reliable: bool) -> float:
    """How long a confirmed INVITE server transaction absorbs ACKs: T4, or 0 when reliable."""
    return 0.0 if reliable else t.t4


def timer_j(t: Timers, *, reliable: bool) -> float:
    """How long a completed non-INVITE server transaction answers its request resent:
    64*T1, or 0 when reliable."""
    return 0.0 if reliable else 64 * t.t1


def timer_k(t: Timers, *, reliable: bool) -> float:
    """How long a completed non-INVITE client transaction absorbs its final response
    resent: T4, or 0 when reliable."""
    return 0.0 if reliable else t.t4


def timer_l(t: Timers) -> float:
    """How long an accepted INVITE server transaction absorbs the INVITE resent (RFC 6026
    §8.7): 64*T1, which is also how long §13.3.1.4 resends the 2xx without an ACK."""
    return 64 * t.t1


def timer_m(t: Timers) -> float:
    """How long an accepted INVITE client transaction passes 2xx resent to the TU (RFC 6026
    §8.4): 64*T1."""
    return 64 * t.t1


def cancel_wait(t: Timers) -> float:
    """§9.1: "If there is no final response for the original request in 64*T1 seconds ...
    the client SHOULD then consider the original transaction cancelled"."""
    return 64 * t.t1


def linger(t: Timers) -> float:
    """How long a dialog is kept once its call is over, for messages resent late: 64*T1,
    the longest any transaction's peer goes on resending (timers B, F, H, J, L, M)."""
    return 64 * t.t1


# --- matching (§17.1.3, §17.2.3) -----------------------------------------------------------------
def client_key(message: Message) -> str:
    """§17.1.3: a response matches the client transaction whose request had the same branch
    in its top Via and the same method in its CSeq."""
    return f"{message.branch}:{message.cseq[1]}"


def server_key(request: Message) -> str | None:
    """§17.2.3: a request matches the server transaction of the same branch, sent-by and
    method, an ACK the INVITE's. None for a branch without the magic cookie (an RFC 2543
    peer's), which matches nothing reliably: such a request is answered statelessly."""
    branch = request.branch
    if not branch.startswith(MAGIC_COOKIE):
        return None
    top = request.get_all("Via")[0]
    sent_by = top.split(None, 1)[-1].split(";", 1)[0].strip()
    method = "INVITE" if request.method == "ACK" else request.method
    return f"{branch}:{sent_by}:{method}"


def ack_for(invite: Message, response: Message) -> Message:
    """§17.1.1.3: the ACK a client transaction sends for a 3xx-6xx to its INVITE. "The
    Request-URI ... MUST be equal to the value of the Request-URI of the original request",
    its Call-ID, From and CSeq number too; "The To header field in the ACK MUST equal the To
    header field in the response being acknowledged"; "The ACK MUST contain a single Via
    header field, and this MUST be equal to the top Via header field of the original
    request"; and the INVITE's Route header fields "MUST appear in the ACK"."""
    number, _ = invite.cseq
    copied = {
        "Via": invite.get_all("Via")[:1],
        "Max-Forwards": invite.get_all("Max-Forwards"),
        "From": invite.get_all("From"),
        "To": response.get_all("To")[:1] or invite.get_all("To"),
        "Call-ID": invite.get_all("Call-ID"),
        "CSeq": [f"{number} ACK"],
        "Route": invite.get_all("Route"),
        "User-Agent": invite.get_all("User-Agent"),
    }
    ack = Message(method="ACK", uri=invite.uri)
    ack.headers = [(name, value) for name, values in copied.items() for value in values]
    return ack


# --- events: what happens to a transaction ------------------------------------------------------
@dataclass(frozen=True)
class Received:
    """A message from the transport that matched the transaction."""

    message: Message


@dataclass(frozen=True)
class FromTu:
    """A response the TU sends through a server transaction."""

    message: Message


@dataclass(frozen=True)
class TimerFired:
    timer: Timer


@dataclass(frozen=True)
class TransportFailed:
    """The transport could not send what the transaction gave it."""

    reason: str


@dataclass(frozen=True)
class CancelSent:
    """The TU has sent a CANCEL for this INVITE (§9.1)."""


Event = Received | FromTu | TimerFired | TransportFailed | CancelSent


# --- actions: what the transaction asks of its driver -------------------------------------------
@dataclass(frozen=True)
class Transmit:
    message: Message


@dataclass(frozen=True)
class StartTimer:
    """Start `timer` to fire in `seconds`; a running timer of that name is replaced."""

    timer: Timer
    seconds: float


@dataclass(frozen=True)
class StopTimer:
    timer: Timer


@dataclass(frozen=True)
class Deliver:
    """Tell the TU: this response (client) or request (server) is for it."""

    message: Message


@dataclass(frozen=True)
class TimedOut:
    """Tell the TU: the transaction failed when `timer` fired."""

    timer: Timer


@dataclass(frozen=True)
class Failed:
    """Tell the TU: the transport failed (§17.1.4, §17.2.4)."""

    reason: str


@dataclass(frozen=True)
class Terminated:
    """The transaction is over: it matches nothing more, and its running timers are void."""


Action = Transmit | StartTimer | StopTimer | Deliver | TimedOut | Failed | Terminated


class State(StrEnum):
    CALLING = "calling"
    TRYING = "trying"
    PROCEEDING = "proceeding"
    COMPLETED = "completed"
    CONFIRMED = "confirmed"
    ACCEPTED = "accepted"
    TERMINATED = "terminated"


# --- the machines --------------------------------------------------------------------------------
class Transaction:
    """What the four share: the request the transaction is for, T1/T2/T4, whether the
    transport is reliable, the state, and which timers run. `start()` gives the first
    actions, `handle(event)` those of every event after."""

    initial = State.TRYING

    def __init__(self, request: Message, timers: Timers, *, reliable: bool) -> None:
        self.request, self.timers, self.reliable = request, timers, reliable
        self.state = self.initial
        self.running: set[Timer] = set()
        self.transmissions = 0  # of the message the retransmission timer resends

    @property
    def pending(self) -> bool:
        """No final response yet, received (client) or sent (server)."""
        return self.state in (State.CALLING, State.TRYING, State.PROCEEDING)

    def start(self) -> list[Action]:
        return []

    def handle(self, event: Event) -> list[Action]:
        if self.state is State.TERMINATED:
            return []
        if isinstance(event, TimerFired):
            if event.timer not in self.running:
                return []  # stopped in the meantime
            self.running.discard(event.timer)
            return self._timer(event.timer)
        if isinstance(event, TransportFailed):
            # §17.1.4, §17.2.4: a transport failure is reported to the TU, and the
            # transaction moves to Terminated, whatever its state.
            return self._terminate(Failed(event.reason))
        if isinstance(event, Received):
            return self._received(event.message)
        if isinstance(event, FromTu):
            return self._from_tu(event.message)
        if isinstance(event, CancelSent):
            return self._cancel_sent()
        raise TypeError(f"not a transaction event: {event!r}")

    def _received(self, message: Message) -> list[Action]:
        return []

    def _from_tu(self, response: Message) -> list[Action]:
        return []

    def _timer(self, timer: Timer) -> list[Action]:
        return []

    def _cancel_sent(self) -> list[Action]:
        return []

    def _start(self, timer: Timer, seconds: float) -> StartTimer:
        self.running.add(timer)
        return StartTimer(timer, seconds)

    def _stop(self, *timers: Timer) -> list[Action]:
        stopped = [StopTimer(timer) for timer in timers if timer in self.running]
        self.running.difference_update(timers)
        return stopped

    def _resend(self, message: Message, timer: Timer, seconds: float) -> list[Action]:
        return [Transmit(message), self._start(timer, seconds)]

    def _transmit(
        self, message: Message, resend: tuple[Timer, float], limit: tuple[Timer, float]
    ) -> list[Action]:
        """`message` sent, the `resend` timer started to send it again over an unreliable
        transport only, and the `limit` timer over any transport."""
        actions: list[Action] = [Transmit(message)]
        if not self.reliable:
            actions.append(self._start(*resend))
        return [*actions, self._start(*limit)]

    def _terminate(self, *told: Action) -> list[Action]:
        self.state = State.TERMINATED
        self.running.clear()
        return [*told, Terminated()]


class InviteClient(Transaction):
    """§17.1.1, as RFC 6026 §8.4 corrects it: an INVITE Relay sends. A 3xx-6xx is ACKed here
    (§17.1.1.3); a 2xx is the TU's to ACK (§13.2.2.4), each time it comes."""

    initial = State.CALLING

    def __init__(self, request: Message, timers: Timers, *, reliable: bool) -> None:
        super().__init__(request, timers, reliable=reliable)
        self.ack: Message | None = None

    def start(self) -> list[Action]:
        self.transmissions = 1
        # §17.1.1.2: "If an unreliable transport is being used, the client transaction MUST
        # start timer A with a value of T1. If a reliable transport is being used, the client
        # transaction SHOULD NOT start timer A ... For any transport, the client transaction
        # MUST start timer B with a value of 64*T1 seconds".
        resend, limit = (Timer.A, timer_a(self.timers)), (Timer.B, timer_b(self.timers))
        return self._transmit(self.request, resend, limit)

    def _timer(self, timer: Timer) -> list[Action]:
        if timer is Timer.A:
            # "When timer A fires, the client transaction MUST retransmit the request ...
            # and reset the timer with a value of 2*T1" (doubling each time: no cap).
            self.transmissions += 1
            return self._resend(self.request, Timer.A, timer_a(self.timers, self.transmissions))
        if timer is Timer.B:
            # "If the client transaction is still in the "Calling" state when timer B
            # fires, the client transaction SHOULD inform the TU that a timeout has
            # occurred. The client transaction MUST NOT generate an ACK."
            return self._terminate(TimedOut(Timer.B))
        if timer is Timer.CANCEL:
            return self._terminate(TimedOut(Timer.CANCEL))
        # Timer D (Completed) or M (Accepted): "the client transaction MUST move to the
        # Terminated state".
        return self._terminate()

    def _cancel_sent(self) -> list[Action]:
        if not self.pending:
            return []  # the final response came first
        return [self._start(Timer.CANCEL, cancel_wait(self.timers))]

    def _received(self, response: Message) -> list[Action]:
        if response.is_request:
            return []
        status = response.status
        if self.pending and status < 200:
            # "In the "Proceeding" state, the client transaction SHOULD NOT retransmit the
            # request any longer"; timer B only ever ends the Calling state.
            self.state = State.PROCEEDING
            return [*self._stop(Timer.A, Timer.B), Deliver(response)]
        if self.pending and status < 300:
            # RFC 6026 §8.4: "If a 2xx response is received while the client INVITE state
            # machine is in the "Calling" or "Proceeding" states, it MUST transition to
            # the "Accepted" state, pass the 2xx response to the TU, and set Timer M to
            # 64*T1."
            self.state = State.ACCEPTED
            stopped = self._stop(Timer.A, Timer.B, Timer.CANCEL)
            return [*stopped, Deliver(response), self._start(Timer.M, timer_m(self.timers))]
        if self.pending:
            # §17.1.1.2: "reception of a response with status code from 300-699 MUST cause
            # the client transaction to transition to "Completed". The client transaction
            # MUST pass the received response up to the TU, and the client transaction MUST
            # generate an ACK request, even if the transport is reliable ... The client
            # transaction SHOULD start timer D".
            self.state = State.COMPLETED
            self.ack = ack_for(self.request, response)
            stopped = self._stop(Timer.A, Timer.B, Timer.CANCEL)
            timer_d_seconds = timer_d(self.timers, reliable=self.reliable)
            return [
                *stopped,
                Transmit(self.ack),
                Deliver(response),
                self._start(Timer.D, timer_d_seconds),
            ]
        if self.state is State.ACCEPTED and 200 <= status < 300:
            # RFC 6026 §8.4: "A 2xx response received while in the "Accepted" state MUST
            # be passed to the TU".
            return [Deliver(response)]
        if self.state is State.COMPLETED and status >= 300 and self.ack is not None:
            # "Any retransmissions of the final response that are received while in the
            # "Completed" state MUST cause the ACK to be re-passed to the transport layer
            # for retransmission, but the newly received response MUST NOT be passed up to
            # the TU."
            return [Transmit(self.ack)]
        return []


class NonInviteClient(Transaction):
    """§17.1.2: a BYE, CANCEL or REGISTER Relay sends."""

    def start(self) -> list[Action]:
        self.transmissions = 1
        # §17.1.2.2: "the client transaction MUST set timer F to fire in 64*T1 seconds ...
        # If an unreliable transport is in use, the client transaction MUST set timer E to
        # fire in T1 seconds."
        resend, limit = (Timer.E, timer_e(self.timers)), (Timer.F, timer_f(self.timers))
        return self._transmit(self.request, resend, limit)

    def _timer(self, timer: Timer) -> list[Action]:
        if timer is Timer.E and self.state is State.PROCEEDING:
            # "If Timer E fires while in the "Proceeding" state, the request MUST be passed
            # to the transport layer for retransmission, and Timer E MUST be reset with a
            # value of T2 seconds."
            return self._resend(self.request, Timer.E, timer_e(self.timers, proceeding=True))
        if timer is Timer.E:
            # In Trying: "the timer is reset, but this time with a value of MIN(2*T1, T2)",
            # and so on, doubling up to T2.
            self.transmissions += 1
            return self._resend(self.request, Timer.E, timer_e(self.timers, self.transmissions))
        if timer is Timer.F:
            # "If Timer F fires while the client transaction is still in the "Trying"
            # state, the client transaction SHOULD inform the TU about the timeout"; in
            # "Proceeding" the TU "MUST be informed of a timeout".
            return self._terminate(TimedOut(Timer.F))
        # Timer K: "the client transaction MUST transition to the "Terminated" state."
        return self._terminate()

    def _received(self, response: Message) -> list[Action]:
        if response.is_request or not self.pending:
            return []  # Completed: "buffer any additional response retransmissions"
        if response.status < 200:
            # "If a provisional response is received while in the "Trying" state, the
            # response MUST be passed to the TU, and then the client transaction SHOULD move
            # to the "Proceeding" state."
            self.state = State.PROCEEDING
            return [Deliver(response)]
        # "If a final response (status codes 200-699) is received while in the "Trying" [or
        # "Proceeding"] state, the response MUST be passed to the TU, and the client
        # transaction MUST transition to the "Completed" state." "Once the client
        # transaction enters the "Completed" state, it MUST set Timer K to fire in T4
        # seconds for unreliable transports, and zero seconds for reliable transports."
        self.state = State.COMPLETED
        stopped = self._stop(Timer.E, Timer.F)
        timer_k_seconds = timer_k(self.timers, reliable=self.reliable)
        return [*stopped, Deliver(response), self._start(Timer.K, timer_k_seconds)]


class InviteServer(Transaction):
    """§17.2.1, as RFC 6026 §8.5-8.7 corrects it: an INVITE Relay received. In Accepted it
    also resends the 2xx until its ACK (§13.3.1.4) over an unreliable transport, the work
    RFC 3261 gives the UAS core, so that the UAS keeps no timer of its own."""

    initial = State.PROCEEDING

    def __init__(self, request: Message, timers: Timers, *, reliable: bool) -> None:
        super().__init__(request, timers, reliable=reliable)
        self.provisional: Message | None = None
        self.final: Message | None = None
        self.acked = False

    def start(self) -> list[Action]:
        # §17.2.1: "The server transaction MUST generate a 100 (Trying) response unless it
        # knows that the TU will generate a provisional or final response within 200 ms".
        # Relay's TU looks the number up first, which can take longer: 100 Trying at once.
        self.provisional = response_to(self.request, 100, "Trying")
        return [Transmit(self.provisional)]

    def _received(self, request: Message) -> list[Action]:
        if not request.is_request:
            return []
        if request.method == "ACK" and self.state is State.COMPLETED:
            # "If an ACK is received while the server transaction is in the "Completed"
            # state, the server transaction MUST transition to the "Confirmed" state. As
            # Timer G is ignored in this state, any retransmissions of the response will
            # cease." Timer I: "T4 seconds for unreliable transports, and zero seconds for
            # reliable transports".
            self.state = State.CONFIRMED
            stopped = self._stop(Timer.G, Timer.H)
            return [*stopped, self._start(Timer.I, timer_i(self.timers, reliable=self.reliable))]
        if request.method == "ACK" and self.state is State.ACCEPTED:
            # RFC 6026 §8.7: "If an ACK is received while the INVITE server transaction is
            # in the "Accepted" state, then the ACK must be passed up to the TU." §13.3.1.4:
            # "Response retransmissions cease when an ACK request for the response is
            # received."
            self.acked = True
            return [*self._stop(Timer.ANSWER), Deliver(request)]
        if request.method == "ACK":
            return []  # Confirmed: it absorbs "any additional ACK messages"
        if self.state is State.PROCEEDING and self.provisional is not None:
            # "If a request retransmission is received while in the "Proceeding" state, the
            # most recent provisional response that was received from the TU MUST be passed
            # to the transport layer for retransmission."
            return [Transmit(self.provisional)]
        if self.state is State.COMPLETED and self.final is not None:
            # "while in the "Completed" state, if a request retransmission is received, the
            # server SHOULD pass the response to the transport for retransmission."
            return [Transmit(self.final)]
        # Accepted: RFC 6026 §8.7 has it "absorb retransmissions of an accepted INVITE
        # request"; Confirmed absorbs them too.
        return []

    def _from_tu(self, response: Message) -> list[Action]:
        status = response.status
        if self.state is State.ACCEPTED and 200 <= status < 300:
            # RFC 6026 §8.7: "While in the "Accepted" state, if the TU passes a 2xx
            # response, the server transaction MUST pass the response to the transport
            # layer for transmission."
            self.final = response
            return [Transmit(response)]
        if self.state is not State.PROCEEDING:
            return []  # a final response has gone: any other is discarded
        if status < 200:
            self.provisional = response
            return [Transmit(response)]
        self.final, self.transmissions = response, 1
        if status < 300:
            # RFC 6026 §8.5: "If, while in the "Proceeding" state, the TU passes a 2xx
            # response to the server transaction, the server transaction MUST pass this
            # response to the transport layer for transmission ... The server transaction
            # MUST then transition to the "Accepted" state" and start Timer L, 64*T1.
            # §13.3.1.4: "The 2xx response is passed to the transport with an interval that
            # starts at T1 seconds and doubles for each retransmission until it reaches T2".
            self.state = State.ACCEPTED
            resend, limit = (Timer.ANSWER, timer_g(self.timers)), (Timer.L, timer_l(self.timers))
            return self._transmit(response, resend, limit)
        # §17.2.1: a 300-699 "MUST be passed to the transport layer for transmission, and the
        # state machine MUST enter the "Completed" state. For unreliable transports, timer G
        # is set to fire in T1 seconds, and is not set to fire for reliable transports."
        # "When the "Completed" state is entered, timer H MUST be set to fire in 64*T1
        # seconds for all transports."
        self.state = State.COMPLETED
        resend, limit = (Timer.G, timer_g(self.timers)), (Timer.H, timer_h(self.timers))
        return self._transmit(response, resend, limit)

    def _timer(self, timer: Timer) -> list[Action]:
        if timer in (Timer.G, Timer.ANSWER) and self.final is not None:
            # "If timer G fires, the response is passed to the transport layer once more for
            # retransmission, and timer G is set to fire in MIN(2*T1, T2) seconds", and so
            # on, doubling up to T2; §13.3.1.4 resends a 2xx the same way.
            self.transmissions += 1
            return self._resend(self.final, timer, timer_g(self.timers, self.transmissions))
        if timer is Timer.H:
            # "If timer H fires while in the "Completed" state, it implies that the ACK was
            # never received. In this case, the server transaction MUST transition to the
            # "Terminated" state, and MUST indicate to the TU that a transaction failure has
            # occurred."
            return self._terminate(TimedOut(Timer.H))
        if timer is Timer.L and not self.acked:
            # RFC 6026 §8.7: "If Timer L fires while the INVITE server transaction is in the
            # "Accepted" state, the transaction MUST transition to the "Terminated" state."
            # The TU hears of a 2xx never ACKed: "If the server retransmits the 2xx response
            # for 64*T1 seconds without receiving an ACK, the dialog is confirmed, but the
            # session SHOULD be terminated" (§13.3.1.4).
            return self._terminate(TimedOut(Timer.L))
        # Timer L after the ACK, or timer I (Confirmed): "the server MUST transition to the
        # "Terminated" state".
        return self._terminate()


class NonInviteServer(Transaction):
    """§17.2.2: a BYE, CANCEL or OPTIONS Relay received. The request it is made for is
    handed to the TU by the user agent; the transaction answers the request resent."""

    def __init__(self, request: Message, timers: Timers, *, reliable: bool) -> None:
        super().__init__(request, timers, reliable=reliable)
        self.last_response: Message | None = None

    def _received(self, request: Message) -> list[Action]:
        if not request.is_request or self.last_response is None:
            # "Once in the "Trying" state, any further request retransmissions are
            # discarded."
            return []
        # Proceeding: "the most recently sent provisional response MUST be passed to the
        # transport layer for retransmission"; Completed: "the server transaction MUST pass
        # the final response to the transport layer for retransmission whenever a
        # retransmission of the request is received."
        return [Transmit(self.last_response)]

    def _from_tu(self, response: Message) -> list[Action]:
        if not self.pending:
            # "Any other final responses passed by the TU to the server transaction MUST be
            # discarded while in the "Completed" state."
            return []
        self.last_response = response
        if response.status < 200:
            self.state = State.PROCEEDING
            return [Transmit(response)]
        # "When the server transaction enters the "Completed" state, it MUST set Timer J to
        # fire in 64*T1 seconds for unreliable transports, and zero seconds for reliable
        # transports."
        self.state = State.COMPLETED
        timer_j_seconds = timer_j(self.timers, reliable=self.reliable)
        return [Transmit(response), self._start(Timer.J, timer_j_seconds)]

    def _timer(self, timer: Timer) -> list[Action]:
        # Timer J: "at which point it MUST transition to the "Terminated" state."
        return self._terminate()
