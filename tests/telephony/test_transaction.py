"""RFC 3261 §17's four transactions (with RFC 6026's Accepted state), driven through every
state and every timer on a clock of the test's own: no socket, no sleeping.

`Clock` does what ua.TransactionDriver does on the agent's loop: it transmits (here: records,
with the time), starts and stops timers, fires each one when time is advanced past it, and
keeps what the transaction tells the TU."""

from __future__ import annotations

import pytest

from telephony.sip.message import Message, params, response_to
from telephony.sip.transaction import (
    CancelSent,
    Deliver,
    Failed,
    FromTu,
    InviteClient,
    InviteServer,
    NonInviteClient,
    NonInviteServer,
    Received,
    StartTimer,
    State,
    StopTimer,
    Terminated,
    TimedOut,
    Timer,
    TimerFired,
    Timers,
    Transaction,
    Transmit,
    TransportFailed,
    ack_for,
    cancel_wait,
    client_key,
    linger,
    server_key,
    timer_a,
    timer_b,
    timer_d,
    timer_e,
    timer_f,
    timer_g,
    timer_h,
    timer_i,
    timer_j,
    timer_k,
    timer_l,
    timer_m,
)

TIMERS = Timers()  # T1 0.5 s, T2 4 s, T4 5 s
TRANSPORTS = pytest.mark.parametrize("reliable", [False, True], ids=["udp", "reliable"])


class Clock:
    """Runs one transaction on fake time. `sent` holds (time, message) for each Transmit,
    `started` (time, timer, seconds) for each StartTimer, `told` what the TU was told."""

    def __init__(self, transaction: Transaction) -> None:
        self.transaction = transaction
        self.now = 0.0
        self.due: dict[Timer, float] = {}
        self.sent: list[tuple[float, Message]] = []
        self.started: list[tuple[float, Timer, float]] = []
        self.told: list = []
        self.terminated_at: float | None = None
        self._apply(transaction.start())

    def feed(self, event) -> None:
        self._apply(self.transaction.handle(event))

    def receive(self, message: Message) -> None:
        self.feed(Received(message))

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, firing every timer that falls due, in order."""
        end = self.now + seconds
        while self.due and min(self.due.values()) <= end:
            timer, at = min(self.due.items(), key=lambda item: item[1])
            del self.due[timer]
            self.now = at
            self.feed(TimerFired(timer))
        self.now = end

    def _apply(self, actions) -> None:
        assert self.terminated_at is None or not actions, "a terminated transaction acted"
        for action in actions:
            if isinstance(action, Transmit):
                self.sent.append((self.now, action.message))
            elif isinstance(action, StartTimer):
                self.due[action.timer] = self.now + action.seconds
                self.started.append((self.now, action.timer, action.seconds))
            elif isinstance(action, StopTimer):
                del self.due[action.timer]  # a timer that is not running is never stopped
            elif isinstance(action, Terminated):
                self.due.clear()
                self.terminated_at = self.now
            else:
                self.told.append(action)

    # What the assertions read.
    def times(self, method_or_status=None) -> list[float]:
        return [
            at
            for at, message in self.sent
            if method_or_status is None or method_or_status in (message.method, message.status)
        ]

    def ever_started(self, timer: Timer) -> list[float]:
        return [seconds for _, started, seconds in self.started if started is timer]


def request(method: str, *, branch: str = "z9hG4bKone", sent_by: str = "192.0.2.1:5060"):
    message = Message(method=method, uri="sip:+442079460123@trunk.example")
    message.headers = [
        ("Via", f"SIP/2.0/UDP {sent_by};branch={branch};rport"),
        ("Max-Forwards", "70"),
        ("From", "<sip:+442079460001@trunk.example>;tag=caller"),
        ("To", "<sip:+442079460123@trunk.example>"),
        ("Call-ID", "call-1@192.0.2.1"),
        ("CSeq", f"1 {method}"),
        ("User-Agent", "Relay"),
    ]
    return message


def response(to: Message, status: int) -> Message:
    return response_to(to, status, "Reason", to_tag="callee")


def invite_client(reliable: bool = False) -> tuple[Clock, Message]:
    invite = request("INVITE")
    return Clock(InviteClient(invite, TIMERS, reliable=reliable)), invite


def invite_server(reliable: bool = False) -> tuple[Clock, Message]:
    invite = request("INVITE")
    return Clock(InviteServer(invite, TIMERS, reliable=reliable)), invite


# --- the timers, as functions of T1, T2 and T4 ----------------------------------------------------
@pytest.mark.parametrize(
    ("timers", "expected"),
    [
        (TIMERS, {"A": 0.5, "B": 32, "E": 0.5, "F": 32, "G": 0.5, "H": 32, "L": 32, "M": 32}),
        (
            Timers(t1=0.1, t2=1.0, t4=2.0),
            {"A": 0.1, "B": 6.4, "E": 0.1, "F": 6.4, "G": 0.1, "H": 6.4, "L": 6.4, "M": 6.4},
        ),
    ],
    ids=["rfc defaults", "other T1 T2 T4"],
)
def test_each_timer_is_its_function_of_t1(timers, expected):
    values = {
        "A": timer_a(timers),
        "B": timer_b(timers),
        "E": timer_e(timers),
        "F": timer_f(timers),
        "G": timer_g(timers),
        "H": timer_h(timers),
        "L": timer_l(timers),
        "M": timer_m(timers),
    }
    assert values == pytest.approx(expected)
    assert cancel_wait(timers) == linger(timers) == pytest.approx(64 * timers.t1)


def test_timer_a_doubles_without_a_cap_while_e_and_g_stop_at_t2():
    assert [timer_a(TIMERS, n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 16, 32]
    assert [timer_e(TIMERS, n) for n in range(1, 6)] == [0.5, 1, 2, 4, 4]
    assert [timer_g(TIMERS, n) for n in range(1, 6)] == [0.5, 1, 2, 4, 4]
    assert timer_e(Timers(t2=2.0), 4) == 2.0
    assert timer_e(TIMERS, 1, proceeding=True) == TIMERS.t2


@pytest.mark.parametrize(
    ("timer", "unreliable", "reliable"),
    [(timer_d, 32.0, 0.0), (timer_i, 5.0, 0.0), (timer_j, 32.0, 0.0), (timer_k, 5.0, 0.0)],
    ids=["D", "I", "J", "K"],
)
def test_the_waits_for_late_retransmissions_are_zero_over_a_reliable_transport(
    timer, unreliable, reliable
):
    assert timer(TIMERS, reliable=False) == unreliable
    assert timer(TIMERS, reliable=True) == reliable
    if timer in (timer_i, timer_k):
        assert timer(Timers(t4=7.0), reliable=False) == 7.0  # T4, not a constant


# --- matching ------------------------------------------------------------------------------------
def test_a_response_matches_its_client_transaction_by_branch_and_cseq_method():
    invite = request("INVITE")
    cancel = request("CANCEL")

    assert client_key(response(invite, 180)) == client_key(invite)
    assert client_key(response(cancel, 200)) == client_key(cancel) != client_key(invite)


def test_an_ack_of_a_refusal_matches_the_invites_server_transaction_and_nothing_else_does():
    invite = request("INVITE")

    assert server_key(request("ACK")) == server_key(invite) is not None
    assert server_key(request("CANCEL")) != server_key(invite)  # §9.2: a transaction of its own
    assert server_key(request("INVITE", sent_by="192.0.2.9:5060")) != server_key(invite)
    assert server_key(request("INVITE", branch="z9hG4bKtwo")) != server_key(invite)
    assert server_key(request("INVITE", branch="rfc2543-branch")) is None


# --- the INVITE client transaction (§17.1.1, RFC 6026 §8.4) ---------------------------------------
def test_an_invite_over_udp_is_resent_at_t1_doubling_until_timer_b_times_it_out():
    clock, invite = invite_client()

    clock.advance(31.75)
    assert clock.told == [] and clock.transaction.state is State.CALLING
    clock.advance(0.25)

    assert clock.times("INVITE") == [0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5]
    assert all(message is invite for _, message in clock.sent)
    assert clock.told == [TimedOut(Timer.B)]
    assert (clock.terminated_at, clock.transaction.state) == (32, State.TERMINATED)


def test_an_invite_over_a_reliable_transport_is_sent_once_and_times_out_at_timer_b():
    clock, _ = invite_client(reliable=True)

    clock.advance(40)

    assert clock.times() == [0]
    assert clock.ever_started(Timer.A) == []
    assert (clock.told, clock.terminated_at) == ([TimedOut(Timer.B)], 32)


@TRANSPORTS
def test_a_provisional_response_stops_the_resending_and_timer_b(reliable):
    clock, invite = invite_client(reliable)
    clock.advance(1.0)
    ringing = response(invite, 180)

    clock.receive(ringing)
    clock.advance(600)

    assert clock.times() == ([0] if reliable else [0, 0.5])
    assert clock.told == [Deliver(ringing)]
    assert clock.transaction.state is State.PROCEEDING
    assert clock.due == {} and clock.terminated_at is None  # waits for the final response


@TRANSPORTS
def test_a_refusal_is_acked_passed_up_once_and_its_resends_acked_again_until_timer_d(reliable):
    clock, invite = invite_client(reliable)
    clock.receive(response(invite, 100))
    busy = response(invite, 486)

    clock.advance(2.0)
    clock.receive(busy)
    clock.receive(busy)  # resent by the far end: the ACK was lost

    acks = [message for _, message in clock.sent if message.method == "ACK"]
    assert [at for at, m in clock.sent if m.method == "ACK"] == [2.0, 2.0]
    assert acks[0].branch == invite.branch and acks[0].cseq == (1, "ACK")
    assert params(acks[0].get("To"))["tag"] == "callee"
    assert clock.told == [Deliver(response(invite, 100)), Deliver(busy)]
    assert clock.transaction.state is State.COMPLETED
    assert clock.ever_started(Timer.D) == [0.0 if reliable else 32.0]

    clock.advance(0.0 if reliable else 31.75)
    assert (clock.terminated_at is None) is not reliable
    clock.advance(0.25)
    assert clock.terminated_at == (2.0 if reliable else 34.0)
    assert clock.told[-1] == Deliver(busy)  # timer D tells the TU nothing


def test_a_refusal_straight_after_the_invite_stops_timer_a_and_b():
    clock, invite = invite_client()

    clock.receive(response(invite, 503))
    clock.advance(32.0)

    assert clock.times("INVITE") == [0]
    assert [type(told) for told in clock.told] == [Deliver]
    assert clock.terminated_at == 32.0


def test_the_ack_of_a_refusal_is_the_invites_request_with_the_responses_to():
    invite = request("INVITE")
    invite.set("Route", "<sip:proxy.example;lr>")
    refusal = response(invite, 404)

    ack = ack_for(invite, refusal)

    assert (ack.method, ack.uri) == ("ACK", invite.uri)
    assert ack.get_all("Via") == invite.get_all("Via")[:1]
    assert ack.get("To") == refusal.get("To") != invite.get("To")
    assert (ack.get("From"), ack.sip_call_id) == (invite.get("From"), invite.sip_call_id)
    assert ack.get("CSeq") == "1 ACK"
    assert ack.get("Route") == "<sip:proxy.example;lr>"


@TRANSPORTS
def test_a_2xx_moves_to_accepted_and_each_2xx_resent_is_the_tus_until_timer_m(reliable):
    clock, invite = invite_client(reliable)
    clock.advance(0.75)
    ok = response(invite, 200)

    clock.receive(ok)
    clock.receive(ok)
    assert clock.transaction.state is State.ACCEPTED
    assert clock.told == [Deliver(ok), Deliver(ok)]  # ACKing a 2xx is the TU's (§13.2.2.4)
    assert "ACK" not in [message.method for _, message in clock.sent]
    assert clock.ever_started(Timer.M) == [32]

    clock.advance(31.75)
    clock.receive(ok)
    clock.advance(0.25)

    assert len(clock.told) == 3
    assert clock.terminated_at == 32.75
    assert clock.times("INVITE") == ([0] if reliable else [0, 0.5])


def test_a_canceled_invite_without_a_final_response_is_given_up_after_64_t1():
    clock, invite = invite_client()
    clock.receive(response(invite, 180))
    clock.advance(5)

    clock.feed(CancelSent())
    clock.advance(31.75)
    assert clock.terminated_at is None
    clock.advance(0.25)

    assert clock.told[-1] == TimedOut(Timer.CANCEL)
    assert clock.terminated_at == 37


def test_a_canceled_invite_ends_as_usual_with_its_487():
    clock, invite = invite_client()
    clock.receive(response(invite, 180))
    clock.feed(CancelSent())

    clock.receive(response(invite, 487))
    clock.advance(600)

    assert [m.method for _, m in clock.sent] == ["INVITE", "ACK"]
    assert clock.told[-1] == Deliver(response(invite, 487))
    assert TimedOut(Timer.CANCEL) not in clock.told
    assert clock.terminated_at == 32  # timer D, not the cancel wait


def test_a_cancel_after_the_final_response_starts_nothing():
    clock, invite = invite_client()
    clock.receive(response(invite, 200))

    clock.feed(CancelSent())

    assert clock.ever_started(Timer.CANCEL) == []


# --- the non-INVITE client transaction (§17.1.2) --------------------------------------------------
def test_a_request_over_udp_is_resent_doubling_up_to_t2_until_timer_f_times_it_out():
    clock = Clock(NonInviteClient(request("BYE"), TIMERS, reliable=False))

    clock.advance(32)

    times = clock.times("BYE")
    assert times[:5] == [0, 0.5, 1.5, 3.5, 7.5]
    assert {b - a for a, b in zip(times[4:], times[5:], strict=False)} == {4.0}  # capped at T2
    assert times[-1] == 31.5
    assert (clock.told, clock.terminated_at) == ([TimedOut(Timer.F)], 32)


def test_a_request_over_a_reliable_transport_is_sent_once_and_times_out_at_timer_f():
    clock = Clock(NonInviteClient(request("BYE"), TIMERS, reliable=True))

    clock.advance(32)

    assert clock.times() == [0]
    assert clock.ever_started(Timer.E) == []
    assert (clock.told, clock.terminated_at) == ([TimedOut(Timer.F)], 32)


def test_after_a_provisional_response_the_request_is_resent_every_t2():
    bye = request("BYE")
    clock = Clock(NonInviteClient(bye, TIMERS, reliable=False))
    clock.advance(0.75)  # sent at 0 and 0.5; timer E next fires at 1.5

    clock.receive(response(bye, 100))
    clock.advance(10)

    assert clock.transaction.state is State.PROCEEDING
    assert clock.times("BYE") == [0, 0.5, 1.5, 5.5, 9.5]
    assert clock.told == [Deliver(response(bye, 100))]


def test_a_provisional_response_does_not_stop_timer_f():
    bye = request("BYE")
    clock = Clock(NonInviteClient(bye, TIMERS, reliable=True))

    clock.receive(response(bye, 100))
    clock.advance(32)

    assert clock.told == [Deliver(response(bye, 100)), TimedOut(Timer.F)]


@TRANSPORTS
def test_a_final_response_is_passed_up_once_and_resends_absorbed_until_timer_k(reliable):
    bye = request("BYE")
    clock = Clock(NonInviteClient(bye, TIMERS, reliable=reliable))
    clock.advance(1.0)
    ok = response(bye, 200)

    clock.receive(ok)
    clock.receive(ok)

    assert clock.told == [Deliver(ok)]
    assert clock.transaction.state is State.COMPLETED
    assert clock.ever_started(Timer.K) == [0.0 if reliable else 5.0]
    clock.advance(0.0 if reliable else 4.75)
    assert (clock.terminated_at is None) is not reliable
    clock.advance(0.25)
    assert clock.terminated_at == (1.0 if reliable else 6.0)
    assert clock.times("BYE") == ([0] if reliable else [0, 0.5])  # E and F stopped
    assert clock.told == [Deliver(ok)]  # no timeout


# --- the INVITE server transaction (§17.2.1, RFC 6026 §8.5-8.7) -----------------------------------
def test_an_invite_is_answered_100_trying_at_once_and_the_last_provisional_when_resent():
    clock, invite = invite_server()
    ringing = response(invite, 180)

    clock.receive(invite)
    clock.feed(FromTu(ringing))
    clock.receive(invite)

    statuses = [message.status for _, message in clock.sent]
    assert statuses == [100, 100, 180, 180]
    trying = clock.sent[0][1]
    assert "tag" not in params(trying.get("To"))  # §8.2.6.2
    assert trying.get_all("Via") == invite.get_all("Via")
    assert clock.transaction.state is State.PROCEEDING
    assert clock.told == [] and clock.due == {}


def test_a_refusal_over_udp_is_resent_doubling_up_to_t2_until_timer_h():
    clock, invite = invite_server()
    clock.advance(1.0)

    clock.feed(FromTu(response(invite, 486)))
    clock.advance(32)

    times = clock.times(486)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[:4] == [0.5, 1, 2, 4] and set(gaps[3:]) == {4}
    assert times[-1] <= 33.0
    assert clock.told == [TimedOut(Timer.H)]
    assert clock.terminated_at == 33.0


def test_a_refusal_over_a_reliable_transport_is_sent_once_and_timer_h_still_runs():
    clock, invite = invite_server(reliable=True)

    clock.feed(FromTu(response(invite, 486)))
    clock.advance(32)

    assert clock.times(486) == [0]
    assert clock.ever_started(Timer.G) == []
    assert (clock.told, clock.terminated_at) == ([TimedOut(Timer.H)], 32)


@TRANSPORTS
def test_the_ack_confirms_a_refusal_stops_its_resending_and_timer_i_ends_it(reliable):
    clock, invite = invite_server(reliable)
    busy = response(invite, 486)
    clock.feed(FromTu(busy))
    clock.advance(0.75)
    clock.receive(invite)  # resent by the far end: the refusal again

    clock.receive(request("ACK"))
    clock.receive(request("ACK"))  # absorbed

    assert clock.transaction.state is State.CONFIRMED
    assert clock.told == []  # the ACK of a refusal is the transaction's own
    assert clock.ever_started(Timer.I) == [0.0 if reliable else 5.0]
    clock.advance(0.0 if reliable else 4.75)
    assert (clock.terminated_at is None) is not reliable
    clock.advance(0.25)
    assert clock.terminated_at == (0.75 if reliable else 5.75)
    assert clock.times(486) == ([0, 0.75] if reliable else [0, 0.5, 0.75])
    assert clock.told == []  # timer I: no failure to report


def test_a_2xx_over_udp_moves_to_accepted_and_is_resent_until_its_ack():
    clock, invite = invite_server()
    ok = response(invite, 200)

    clock.feed(FromTu(ok))
    clock.advance(4.0)  # resent at 0.5, 1.5 and 3.5
    clock.receive(invite)  # absorbed (RFC 6026)
    ack = request("ACK", branch="z9hG4bKack")
    clock.receive(ack)
    clock.advance(10)

    assert clock.transaction.state is State.ACCEPTED
    assert clock.times(200) == [0, 0.5, 1.5, 3.5]
    assert clock.told == [Deliver(ack)]  # the 2xx's ACK is the TU's too
    assert clock.ever_started(Timer.L) == [32]
    clock.advance(18)
    assert clock.terminated_at == 32
    assert clock.told == [Deliver(ack)]  # acknowledged: timer L reports nothing


@TRANSPORTS
def test_a_2xx_never_acked_is_reported_when_timer_l_fires(reliable):
    clock, invite = invite_server(reliable)

    clock.feed(FromTu(response(invite, 200)))
    clock.advance(32)

    times = clock.times(200)
    if reliable:
        assert times == [0] and clock.ever_started(Timer.ANSWER) == []
    else:
        assert times[:5] == [0, 0.5, 1.5, 3.5, 7.5] and times[-1] == 31.5
    assert (clock.told, clock.terminated_at) == ([TimedOut(Timer.L)], 32)


def test_once_a_final_response_is_sent_the_tu_may_resend_only_a_2xx():
    clock, invite = invite_server(reliable=True)
    ok = response(invite, 200)
    clock.feed(FromTu(ok))

    clock.feed(FromTu(ok))
    clock.feed(FromTu(response(invite, 500)))
    clock.feed(FromTu(response(invite, 180)))

    assert [message.status for _, message in clock.sent] == [100, 200, 200]


def test_after_a_refusal_the_tu_can_send_nothing_more():
    clock, invite = invite_server(reliable=True)
    clock.feed(FromTu(response(invite, 603)))

    clock.feed(FromTu(response(invite, 200)))
    clock.feed(FromTu(response(invite, 180)))

    assert [message.status for _, message in clock.sent] == [100, 603]
    assert clock.transaction.state is State.COMPLETED


# --- the non-INVITE server transaction (§17.2.2) --------------------------------------------------
@TRANSPORTS
def test_a_request_resent_is_absorbed_then_answered_with_the_last_response_until_timer_j(
    reliable,
):
    bye = request("BYE")
    clock = Clock(NonInviteServer(bye, TIMERS, reliable=reliable))

    clock.receive(bye)  # Trying: nothing to resend yet
    assert clock.sent == []
    clock.advance(0.25)
    clock.feed(FromTu(response(bye, 200)))
    clock.feed(FromTu(response(bye, 500)))  # a second final response is discarded
    clock.receive(bye)
    clock.advance(1.0)
    clock.receive(bye)  # over a reliable transport timer J was zero: nothing answers it

    answers = [(at, message.status) for at, message in clock.sent]
    assert answers == [(0.25, 200), (0.25, 200)] + ([] if reliable else [(1.25, 200)])
    assert clock.ever_started(Timer.J) == [0.0 if reliable else 32.0]
    if reliable:
        assert clock.terminated_at == 0.25
    else:
        clock.advance(30.75)
        assert clock.terminated_at is None
        clock.advance(0.25)
        assert clock.terminated_at == 32.25
    assert clock.told == []


def test_a_request_resent_while_proceeding_gets_the_last_provisional_response():
    options = request("OPTIONS")
    clock = Clock(NonInviteServer(options, TIMERS, reliable=False))

    clock.feed(FromTu(response(options, 100)))
    clock.receive(options)

    assert clock.transaction.state is State.PROCEEDING
    assert [message.status for _, message in clock.sent] == [100, 100]
    assert clock.due == {}  # no timer until the final response


# --- every machine --------------------------------------------------------------------------------
def started(kind):
    """Each machine, in a state with timers running, and its request."""
    if kind is InviteClient:
        return invite_client()
    if kind is NonInviteClient:
        bye = request("BYE")
        return Clock(NonInviteClient(bye, TIMERS, reliable=False)), bye
    if kind is InviteServer:
        clock, invite = invite_server()
        clock.feed(FromTu(response(invite, 486)))
        return clock, invite
    bye = request("BYE")
    clock = Clock(NonInviteServer(bye, TIMERS, reliable=False))
    clock.feed(FromTu(response(bye, 200)))
    return clock, bye


MACHINES = pytest.mark.parametrize(
    "kind", [InviteClient, NonInviteClient, InviteServer, NonInviteServer]
)


@MACHINES
def test_a_transport_error_is_told_to_the_tu_and_ends_the_transaction(kind):
    clock, _ = started(kind)
    assert clock.due  # timers were running

    clock.feed(TransportFailed("connection refused"))
    clock.advance(600)

    assert clock.told[-1] == Failed("connection refused")
    assert clock.terminated_at == 0
    assert clock.transaction.state is State.TERMINATED


@MACHINES
def test_a_terminated_transaction_does_nothing_more(kind):
    clock, message = started(kind)
    clock.feed(TransportFailed("gone"))
    told = list(clock.told)

    for event in (
        Received(message),
        Received(response(message, 200)),
        FromTu(response(message, 200)),
        TimerFired(Timer.A),
        CancelSent(),
    ):
        assert clock.transaction.handle(event) == []
    assert clock.told == told


def test_a_timer_stopped_before_it_fires_is_ignored():
    clock, invite = invite_client()
    clock.receive(response(invite, 180))  # stops A and B

    assert clock.transaction.handle(TimerFired(Timer.A)) == []
    assert clock.transaction.handle(TimerFired(Timer.B)) == []
    assert clock.transaction.state is State.PROCEEDING
