"""The states of a call and the moves between them, written once as a table, in the style of
h11's `_state.py`: the states are data, a move is looked up, and what the table does not hold
is refused. Every writer of a call's state asks `move_allowed` first (today
realtime.pipeline.call_transition, the one writer of an outbound call's state).

A call goes forward along QUEUED, DIALING, RINGING, IN_PROGRESS, skipping any of them (a
callee may answer without ringing first), and may end from any of them, in any of the
terminal states, since whatever crashes every call must be able to end. An ended call moves
no more; nor does a call move to the state it is in (a duplicate report is not a move).
"""

from __future__ import annotations

from django.db import models


class CallState(models.TextChoices):
    QUEUED = "queued", "Queued"
    DIALING = "dialing", "Dialing"
    RINGING = "ringing", "Ringing"
    IN_PROGRESS = "in_progress", "In progress"
    COMPLETED = "completed", "Completed"
    BUSY = "busy", "Busy"
    NO_ANSWER = "no_answer", "No answer"
    FAILED = "failed", "Failed"
    CANCELED = "canceled", "Canceled"


TERMINAL_STATES = frozenset(
    {CallState.COMPLETED, CallState.BUSY, CallState.NO_ANSWER, CallState.FAILED, CallState.CANCELED}
)
ACTIVE_STATES = frozenset(set(CallState) - TERMINAL_STATES)

# The order a call passes its active states in (DESIGN.md §5.5).
_FORWARD = (CallState.QUEUED, CallState.DIALING, CallState.RINGING, CallState.IN_PROGRESS)

# Each state, and the states a call in it may move to.
MOVES: dict[CallState, frozenset[CallState]] = {
    **{
        state: frozenset(_FORWARD[index + 1 :]) | TERMINAL_STATES
        for index, state in enumerate(_FORWARD)
    },
    **{state: frozenset() for state in TERMINAL_STATES},
}


def move_allowed(old: str, new: str) -> bool:
    """Whether a call in state `old` may move to `new` (MOVES); False for a value that is no
    state at all."""
    try:
        return CallState(new) in MOVES[CallState(old)]
    except ValueError:
        return False


CALL_STATE_VALUES = CallState.values  # the schema's CallStateEnum (ENUM_NAME_OVERRIDES)


class LegState(models.TextChoices):
    """Where one leg of a call stands: dialled and ringing, answered (bridged to its call, or
    its party talking), ended."""

    RINGING = "ringing", "Ringing"
    ANSWERED = "answered", "Answered"
    ENDED = "ended", "Ended"


# Each state of a leg, and the states a leg in it may move to: a leg rings, may be answered,
# and ends from either; an ended leg moves no more.
LEG_MOVES: dict[LegState, frozenset[LegState]] = {
    LegState.RINGING: frozenset({LegState.ANSWERED, LegState.ENDED}),
    LegState.ANSWERED: frozenset({LegState.ENDED}),
    LegState.ENDED: frozenset(),
}


def leg_move_allowed(old: str, new: str) -> bool:
    """Whether a leg in state `old` may move to `new` (LEG_MOVES); False for a value that is
    no leg state at all."""
    try:
        return LegState(new) in LEG_MOVES[LegState(old)]
    except ValueError:
        return False
