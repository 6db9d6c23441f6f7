"""Plan quotas: outbound calls and answered seconds per rolling day, and calls up at once.
The legs Relay dials for a call (forwarding targets, a script's `dial`) count as calls: they
are dialled on the owner's behalf.

A user's limits are their plan's (settings.PLANS) unless staff set the user's own. Use is
counted over the rows the call ledger gives (calls.selectors.dialled_uses, registered with
uses_register as the app starts), never an import of it: accounts sits below calls. A call
is up while it has no `ended_at`, and its answered seconds are its `duration` once ended, or
the seconds it was granted (`talk_limit`) while it talks.

Exact under concurrency: a submit (quota_check) and an answer (talk_grant) each count under
the user's row lock (user_lock), in the transaction that writes the call, so two submits can
never both take the last call, and the seconds granted to calls up at once never add up past
the day's quota.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    DateTimeField,
    F,
    Min,
    OuterRef,
    Q,
    Subquery,
    Sum,
    UUIDField,
    When,
)
from django.db.models.functions import Coalesce

from accounts.models import User
from core.errors import ErrorCode, RateLimited
from core.platform.compiled import CompiledInQuery, CompiledQuery

WINDOW = timedelta(days=1)
QUOTAS = ("calls_per_day", "call_seconds_per_day", "concurrent_calls")
# How long a refused submit is told to wait when its calls up at once are the limit: calls
# end in seconds to minutes, and nothing says when the next one will.
CONCURRENT_RETRY_AFTER = 10


@dataclass(frozen=True)
class Quota:
    name: str  # one of QUOTAS
    limit: int | None  # None: unlimited
    used: int
    resets_at: datetime | None  # when the use next drops (rolling quotas); None: nothing to drop


class QuotaExceeded(RateLimited):
    """A 429 `quota_exceeded` with Retry-After; `quota` names the quota (one of QUOTAS)."""

    def __init__(self, retry_after: int, message: str, *, quota: str, limit: int) -> None:
        super().__init__(retry_after, message, code=ErrorCode.QUOTA_EXCEEDED, limit=limit)
        self.quota = quota


def user_lock(user_id) -> User:
    """The user's row, locked until the caller's transaction ends (SQLite: its transactions
    are IMMEDIATE, which serializes them anyway), read afresh: staff may have just changed
    the plan or the limits.

    FOR NO KEY UPDATE, not FOR UPDATE: it serializes the user's submits and answers with each
    other, but not with the foreign-key checks (FOR KEY SHARE) of writes that merely point
    at the user, such as a counter row another call's step inserts while holding the counter
    row this transaction waits for: with FOR UPDATE, that was a deadlock."""
    return User.objects.select_for_update(no_key=True).get(pk=user_id)


def users_lock(user_ids) -> dict:
    """user_lock for several users at once, by pk: the rows are locked in pk order, the same
    order in every transaction, so two batches of submits that share users cannot
    deadlock."""
    rows = User.objects.select_for_update(no_key=True).filter(pk__in=user_ids).order_by("pk")
    return {user.pk: user for user in rows}


def limits_of(user: User) -> dict[str, int | None]:
    """The user's limit of each quota: staff's for this user, else the plan's (a plan no
    longer in PLANS counts as free)."""
    plan = settings.PLANS.get(user.plan) or settings.PLANS["free"]
    own = {name: getattr(user, name) for name in QUOTAS}
    return {name: plan[name] if own[name] is None else own[name] for name in QUOTAS}


# The source of what users dial (uses_register): set once, as the call ledger's app starts.
_use_sources: list[Callable[[], list[tuple]]] = []


def uses_register(source: Callable[[], list[tuple]]) -> None:
    """Count use over what `source()` gives: each kind of use as (its rows, the name of their
    user column), with created_at, answered_at, ended_at, duration and talk_limit."""
    _use_sources[:] = [source]


def _uses() -> list[tuple]:
    """What users dial (uses_register); a RuntimeError when nothing was registered, never a
    silent count of nothing."""
    if not _use_sources:
        raise RuntimeError("no source of quota use is registered (calls.apps)")
    return _use_sources[0]()


def _figures(*, since: datetime, answered: Q, filtered: bool = False) -> list[tuple[Q, dict]]:
    """The figures of one kind of use, as aggregates, each group with the rows it is over
    (`answered`: the rows whose seconds count): created in the window, answered in it, up
    now. Each group's rows are an index's range (call_owner_newest, _answered, _up;
    leg_owner_created). `filtered`: each aggregate carries its group's condition as its
    FILTER, for a query over the rows of every group at once."""
    created, up = Q(created_at__gt=since), Q(ended_at__isnull=True)

    def over(rows_of: Q) -> dict:
        return {"filter": rows_of} if filtered else {}

    seconds = Case(
        When(ended_at__isnull=True, then=Coalesce(F("talk_limit"), 0)),
        default=Coalesce(F("duration"), 0),
    )
    return [
        (
            created,
            {"calls": Count("pk", **over(created)), "first": Min("created_at", **over(created))},
        ),
        (
            answered,
            {
                "seconds": Sum(seconds, **over(answered)),
                "oldest": Min("answered_at", **over(answered)),
            },
        ),
        (up, {"up": Count("pk", **over(up))}),
    ]


def use_columns(*, user_ref, since: datetime, excluding=None) -> dict[str, Subquery]:
    """The columns of a user's use (what _use reads), a subquery each, for a query that reads
    the user anyway: `user_ref` names the user's pk in it (OuterRef("pk") in a query of users,
    OuterRef("user_id") in one of rows that point at a user), `since` is the window's start
    (now - WINDOW). use_of_row turns them into the use; the authentication of GET
    /api/user/me reads them with the user (accounts.selectors), in one round trip.

    Each subquery reads only the rows of its figure (its group's condition in its WHERE, an
    index range), never the user's every call: with the condition as a FILTER, each of the
    ten walked all the calls the user ever made."""
    columns = {}
    for kind, (uses, user) in enumerate(_uses()):
        answered = Q(answered_at__gt=since)
        if excluding is not None and kind == 0:
            answered &= ~Q(pk=excluding)
        mine = uses.filter(**{user: user_ref}).order_by()
        for rows_of, aggregates in _figures(since=since, answered=answered):
            rows = mine.filter(rows_of).values(user)
            for name, aggregate in aggregates.items():
                columns[f"{name}{kind}"] = Subquery(rows.annotate(value=aggregate).values("value"))
    return columns


def _use_query(*, owner, since: datetime, excluding=None):
    """The row of _use: one query over both kinds of use, a subquery per figure."""
    columns = use_columns(user_ref=OuterRef("pk"), since=since, excluding=excluding)
    return User.objects.filter(pk=owner).values(**columns)


# Compiled once per process: building this query cost several times running it, on every
# GET /api/user/me (issue 29). A call is excluded only when an answer is granted its seconds.
_USE = CompiledQuery(_use_query, owner=User._meta.pk, since=DateTimeField(), excluding=UUIDField())


def _use(user: User, now: datetime, *, excluding=None) -> dict:
    """The user's use (_use_query): `calls` created in the window and the `first` of them;
    the answered `seconds` of calls answered in it (each call up now at what it was granted)
    and when the `oldest` of them was answered; the calls `up` now. `excluding` leaves one
    call (a call request's pk) out of the seconds."""
    left_out = {} if excluding is None else {"excluding": excluding}
    (use,) = _USE.rows(owner=user.pk, since=now - WINDOW, **left_out)
    return use_of_row(use)


def _uses_query(*, owners, since: datetime):
    """The rows of uses_of: each kind of use grouped by user, over the rows that count in the
    window (created or answered in it, or up now), the two kinds in one UNION ALL. One pass
    over those rows, where _use_query's ten subqueries a user (a batch's hundred users: a
    thousand) each walked an index on its own."""
    kinds = []
    for uses, user in _uses():
        window = Q(created_at__gt=since) | Q(answered_at__gt=since) | Q(ended_at__isnull=True)
        rows = uses.filter(window, **{f"{user}__in": owners}).order_by()
        rows = rows.values(who=F(user))
        figures = _figures(since=since, answered=Q(answered_at__gt=since), filtered=True)
        kinds.append(rows.annotate(**{k: v for _, group in figures for k, v in group.items()}))
    return kinds[0].union(*kinds[1:], all=True)


# Compiled once per process and size bucket, as _USE: a batch of submits reads it under its
# users' locks, and building it cost more than running it (issue 40).
_USES = CompiledInQuery(_uses_query, lists={"owners": User._meta.pk}, since=DateTimeField())


def uses_of(user_ids, *, now: datetime) -> dict:
    """_use of several users (by pk) in one query: a batch of submits reads its owners'
    together. Every user asked for has one (a user with no calls: none used)."""
    rows: dict = {pk: [] for pk in user_ids}
    for row in _USES.rows(owners=list(user_ids), since=now - WINDOW):
        rows.setdefault(row["who"], []).append(row)
    return {pk: _use_summed(kinds) for pk, kinds in rows.items()}


# The figures of a user's use, as _use_summed gives them.
FIGURES = ("calls", "first", "seconds", "oldest", "up")


def _use_summed(kinds: list[dict]) -> dict:
    """The use of a user's rows of _uses_query (one a kind of use the user has)."""
    return {
        "calls": sum(kind["calls"] or 0 for kind in kinds),
        "first": _earliest(*(kind["first"] for kind in kinds)),
        "seconds": sum(kind["seconds"] or 0 for kind in kinds),
        "oldest": _earliest(*(kind["oldest"] for kind in kinds)),
        "up": sum(kind["up"] or 0 for kind in kinds),
    }


def use_of_row(use: Mapping) -> dict:
    """The use (as _use gives it) from a row that carries the columns of use_columns."""
    kinds = range(len(_uses()))
    return _use_summed([{name: use[f"{name}{kind}"] for name in FIGURES} for kind in kinds])


def _earliest(*moments: datetime | None) -> datetime | None:
    return min((m for m in moments if m is not None), default=None)


def _plus_window(at: datetime | None) -> datetime | None:
    return None if at is None else at + WINDOW


def quotas_of(user: User, *, now: datetime, use: dict | None = None) -> list[Quota]:
    """Each quota of the user: its limit, its use now and when that use next drops. `use` is
    the use at `now` when it was read already (use_of_row); None: it is read here."""
    limits = limits_of(user)
    use = _use(user, now) if use is None else use
    return [
        Quota("calls_per_day", limits["calls_per_day"], use["calls"], _plus_window(use["first"])),
        Quota(
            "call_seconds_per_day",
            limits["call_seconds_per_day"],
            use["seconds"],
            _plus_window(use["oldest"]),
        ),
        Quota("concurrent_calls", limits["concurrent_calls"], use["up"], None),
    ]


def _wait(until: datetime | None, now: datetime) -> int:
    if until is None:
        return int(WINDOW.total_seconds())
    return max(1, math.ceil((until - now).total_seconds()))


def _in_words(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def quota_check(*, user: User, now: datetime) -> None:
    """Refuse one more call of `user` (locked by user_lock, in the transaction that will write
    the call) with QuotaExceeded when a quota is used up, naming it and when to try again."""
    Admission(user=user, now=now).admit()


class Admission:
    """quota_check for the several calls of one user that one transaction writes (a batch of
    submits): the use is read once, and each call admitted counts in it as a call created
    `now` and up."""

    def __init__(self, *, user: User, now: datetime, use: dict | None = None) -> None:
        """`use`: the user's use read already (uses_of), else read now."""
        self.user, self.now = user, now
        self.limits = limits_of(user)
        self.use = _use(user, now) if use is None else use
        self.admitted = 0

    def admit(self) -> None:
        """Count one more call, or refuse it with QuotaExceeded (counting nothing)."""
        self._refuse_if_used_up()
        self.use["calls"] += 1
        self.use["up"] += 1
        self.admitted += 1

    def _refuse_if_used_up(self) -> None:
        user, now, limits, use = self.user, self.now, self.limits, self.use
        limit = limits["concurrent_calls"]
        if limit is not None and use["up"] >= limit:
            raise QuotaExceeded(
                CONCURRENT_RETRY_AFTER,
                f"Your plan allows {limit} call(s) at once, and that many are under way; place "
                "this one when one of them ends.",
                quota="concurrent_calls",
                limit=limit,
            )
        limit = limits["calls_per_day"]
        if limit is not None and use["calls"] >= limit:
            # The call whose leaving the window brings the count under the limit.
            stored = [
                at
                for uses, who in _uses()
                for at in uses.filter(**{who: user, "created_at__gt": now - WINDOW}).values_list(
                    "created_at", flat=True
                )
            ]
            today = sorted(stored + [now] * self.admitted)
            until = today[use["calls"] - limit] if limit else None
            wait = _wait(_plus_window(until), now)
            raise QuotaExceeded(
                wait,
                f"Your plan allows {limit} call(s) a day (a rolling 24 hours), and they are "
                f"used up; try again in {_in_words(wait)}.",
                quota="calls_per_day",
                limit=limit,
            )
        limit = limits["call_seconds_per_day"]
        if limit is not None and use["seconds"] >= limit:
            wait = _wait(_plus_window(use["oldest"]) if limit else None, now)
            raise QuotaExceeded(
                wait,
                f"Your plan allows {limit} answered seconds a day (a rolling 24 hours), and "
                f"they are used up; try again in {_in_words(wait)}.",
                quota="call_seconds_per_day",
                limit=limit,
            )


def talk_grant(*, user: User, call_pk, planned: float | None, now: datetime) -> int | None:
    """The answered seconds call `call_pk` of `user` (locked by user_lock) may talk, granted
    as it is answered: what the provider expects it to talk (`planned`; None: up to
    SIP_MAX_CALL_SECONDS), cut to what is left of the day's quota once every other call's use
    and grant is counted. None when the user's seconds are unlimited."""
    limit = limits_of(user)["call_seconds_per_day"]
    if limit is None:
        return None
    used = _use(user, now, excluding=call_pk)["seconds"]
    wanted = math.ceil(settings.SIP_MAX_CALL_SECONDS if planned is None else planned)
    return max(0, min(limit - used, wanted))
