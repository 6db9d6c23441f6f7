"""Reads of the call ledger that lower layers are given rather than import.

The plan quotas (accounts.quotas) count what a user dials: their outbound calls, and the SIP
legs Relay dials on their behalf (forwarding targets, `dial` verbs' targets). accounts sits
below calls and imports none of it; calls.apps registers `dialled_uses` with it at startup.
"""

from calls.models import DIALLED_ROLES, Call, Direction, Leg, LegKind


def dialled_uses() -> list[tuple]:
    """What a user dials, each kind as (its rows, the name of their user column), every row
    with created_at, answered_at, ended_at, duration and talk_limit: their outbound calls,
    and the SIP legs dialled for their calls. Inbound calls and browser legs go out over no
    trunk and count in no quota."""
    return [
        (Call.objects.filter(direction=Direction.OUTBOUND), "owner"),
        (Leg.objects.filter(kind=LegKind.SIP, role__in=DIALLED_ROLES), "owner"),
    ]
