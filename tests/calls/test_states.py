"""The call ledger's state table (issue 54, calls.states): every pair of states walked, in the
table and through the one writer of an outbound call's state (realtime.pipeline.
call_transition), which moves what the table allows and refuses the rest, leaving the call as
it was and saying so in the log; and the legs' table alike, through calls.services.leg_move."""

import itertools
import logging

import pytest

from calls.models import Call, CallEvent, Leg
from calls.services import leg_move
from calls.states import (
    ACTIVE_STATES,
    LEG_MOVES,
    MOVES,
    TERMINAL_STATES,
    CallState,
    LegState,
    leg_move_allowed,
    move_allowed,
)
from realtime.pipeline import call_transition
from realtime.providers import Step
from tests.factories import CallFactory

FORWARD = [CallState.QUEUED, CallState.DIALING, CallState.RINGING, CallState.IN_PROGRESS]
PAIRS = list(itertools.product(CallState, CallState))


def expected(old: CallState, new: CallState) -> bool:
    """The rule the table writes out: forward through the active states, or to any end, from
    a call that has not ended."""
    if old in TERMINAL_STATES:
        return False
    if new in TERMINAL_STATES:
        return True
    return FORWARD.index(new) > FORWARD.index(old)


def test_the_table_holds_every_state_and_the_rule():
    assert set(MOVES) == set(CallState)
    assert set(FORWARD) == ACTIVE_STATES and set(CallState) == ACTIVE_STATES | TERMINAL_STATES
    for old, new in PAIRS:
        assert move_allowed(old, new) == expected(old, new), (old, new)


def test_every_active_state_can_end_in_every_way():
    # Whatever crashes, a call must be able to end: no active state is a dead end.
    for old in ACTIVE_STATES:
        assert MOVES[old] >= TERMINAL_STATES, old


@pytest.mark.parametrize("value", ["", "answered", "QUEUED", "queued\x00", None, 3])
def test_what_is_no_state_moves_nowhere(value):
    assert not move_allowed(CallState.QUEUED, value)
    assert not move_allowed(value, CallState.FAILED)


@pytest.mark.django_db
@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{o.value}-{n.value}" for o, n in PAIRS])
def test_the_pipeline_moves_what_the_table_allows_and_nothing_else(old, new, caplog):
    call = CallFactory(status=old)
    events = CallEvent.objects.filter(call=call).count()

    with caplog.at_level(logging.WARNING, logger="realtime.pipeline"):
        moved = call_transition(
            call=call, step=Step(status=new, reason="walked"), expected_status=old
        )

    stored = Call.objects.get(pk=call.pk).status
    if expected(old, new):
        assert moved and stored == new
        assert CallEvent.objects.filter(call=call).count() == events + 1
        assert "refused by the state table" not in caplog.text
    else:
        assert not moved and stored == old  # left as it was
        assert CallEvent.objects.filter(call=call).count() == events
        assert f"call {call.pk}: the move from {old} to {new} is refused" in caplog.text


# --- legs --------------------------------------------------------------------------------------
LEG_PAIRS = list(itertools.product(LegState, LegState))
LEG_ORDER = [LegState.RINGING, LegState.ANSWERED, LegState.ENDED]


def test_the_leg_table_holds_every_state_and_the_rule():
    # A leg goes forward (rings, is answered, ends), may end from any state, and moves no more.
    assert set(LEG_MOVES) == set(LegState)
    for old, new in LEG_PAIRS:
        assert leg_move_allowed(old, new) == (LEG_ORDER.index(new) > LEG_ORDER.index(old))
    assert not leg_move_allowed(LegState.RINGING, "bridged")
    assert not leg_move_allowed(None, LegState.ENDED)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("old", "new"), LEG_PAIRS, ids=[f"{o.value}-{n.value}" for o, n in LEG_PAIRS]
)
def test_a_leg_moves_what_its_table_allows_and_nothing_else(old, new, caplog):
    call = CallFactory(status=CallState.IN_PROGRESS)
    leg = Leg.objects.create(
        call=call, owner=call.owner, kind="sip", role="dial_target", phone="+441134960200"
    )
    Leg.objects.filter(pk=leg.pk).update(status=old)
    leg.status = old

    with caplog.at_level(logging.WARNING, logger="calls.services"):
        moved = leg_move(leg=leg, new=new, values={"duration": 7})

    stored = Leg.objects.get(pk=leg.pk)
    if leg_move_allowed(old, new):
        assert moved and (stored.status, stored.duration) == (new, 7)
    else:
        assert not moved and (stored.status, stored.duration) == (old, None)
        assert f"the move from {old} to {new} is refused by the state table" in caplog.text
