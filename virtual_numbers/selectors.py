"""Reads of numbers: the caller's own (a 404 for anything else), the blocklist, inventory, and
the people a number is shared with."""

import json
import logging
import uuid
import zoneinfo
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import JSONArray
from django.utils import timezone

from accounts.models import User
from core import dialing, events
from core.db import JSONList
from core.errors import NotFound
from core.fields import represent
from core.recordings import recording_opener
from virtual_numbers.hours import Hours, open_at
from virtual_numbers.models import (
    BlockedCaller,
    InventoryNumber,
    MemberStatus,
    Number,
    NumberMember,
    OpeningHours,
)
from virtual_numbers.serializers import (
    BlockedCallerOutput,
    ForwardingOutput,
    HoursOutput,
    NumberOutput,
    RingingOutput,
    SharedNumberOutput,
)
from virtual_numbers.services import Forwarding, NumberAccess, RingList

logger = logging.getLogger(__name__)


def number_access(*, user: User, number_id: str | uuid.UUID, lock: bool = False) -> Number:
    """The user's number `number_id`; NotFound for an id that is malformed, unknown or another
    user's (never saying which). `lock` row-locks it for the caller's transaction."""
    try:
        pk = uuid.UUID(str(number_id))
    except ValueError as exc:
        raise NotFound() from exc
    queryset = Number.objects.select_for_update() if lock else Number.objects
    found = queryset.filter(pk=pk, owner=user).first()
    if found is None:
        raise NotFound()
    return found


def number_manage_access(*, user: User, number_id: str | uuid.UUID) -> Number:
    """The number `number_id` whose call handling (ring list, hours, greetings) `user` may
    change: its owner's or a manager's (number_shared_access); NotFound for anyone else, a
    member included (the console's pages; the API tells a member 403 from the same access)."""
    access = number_shared_access(user=user, number_id=number_id)
    if not access.manages:
        raise NotFound()
    return access.number


def _parsed(value) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise NotFound() from exc


def numbers_shared_with(user) -> QuerySet:
    """The ids of the numbers `user` is an active member of, as a subquery (`user` a User
    or its pk, or an OuterRef): what history filters a member's reads with."""
    return NumberMember.objects.filter(user=user, status=MemberStatus.ACTIVE).values("number_id")


def number_reachable(*, user: User) -> Q:
    """The condition on a number (as `number`) that `user` owns it or is its member."""
    return Q(owner=user) | Q(pk__in=numbers_shared_with(user))


def number_shared_access(*, user: User, number_id: str | uuid.UUID) -> NumberAccess:
    """The number `number_id` as `user` reaches it, owner or active member, with their role;
    NotFound for an id that is malformed, unknown, or of a number they neither own nor are a
    member of (never saying which): a removed member's reads end at once. One query."""
    role = NumberMember.objects.filter(
        number=OuterRef("pk"), user=user, status=MemberStatus.ACTIVE
    ).values("role")[:1]
    found = (
        Number.objects.filter(number_reachable(user=user), pk=_parsed(number_id))
        .annotate(member_role=Subquery(role))
        .first()
    )
    if found is None:
        raise NotFound()
    return NumberAccess(
        number=found, role="owner" if found.owner_id == user.pk else found.member_role, user=user
    )


def number_members_heard(*, number_id) -> list[tuple]:
    """The number's active members, each as (user id, the outbox channels they turned on for
    it: core.events.WEBHOOKS, MATRIX), for core.events.send_to_members_on_commit: every
    member's sockets hear of its calls, their webhook and Matrix room only when switched on.
    One indexed query; read it in the transaction that reports the call, so that a member
    removed a moment before is not among them."""
    rows = NumberMember.objects.filter(number_id=number_id, status=MemberStatus.ACTIVE)
    heard = []
    for user_id, webhook, matrix in rows.values_list("user_id", "notify_webhook", "notify_matrix"):
        channels = {events.WEBHOOKS} if webhook else set()
        if matrix:
            channels.add(events.MATRIX)
        heard.append((user_id, frozenset(channels)))
    return heard


def number_members_mailed(*, number_id) -> list[NumberMember]:
    """The number's active members who turned on its missed-call or voicemail mail, with
    their accounts (history.notifications mails them beside the owner)."""
    rows = NumberMember.objects.filter(number_id=number_id, status=MemberStatus.ACTIVE).filter(
        Q(missed_call_email=True) | Q(voicemail_email=True)
    )
    return list(rows.select_related("user").order_by("joined_at", "pk"))


def members_of(*, number: Number) -> list[NumberMember]:
    """The number's members and invitations still pending, oldest first (an invitation past
    its days is left out: it can no longer be accepted)."""
    pending = Q(status=MemberStatus.INVITED, expires_at__gt=timezone.now())
    return list(
        number.members.filter(Q(status=MemberStatus.ACTIVE) | pending).order_by("created_at", "pk")
    )


def member_access(*, access: NumberAccess, member_id: str | uuid.UUID) -> NumberMember:
    """The member (or invitation) `member_id` of the number `access` reaches. The owner and
    managers reach every one; a member only their own row (NotFound for any other, as for an
    id of another number, malformed or unknown)."""
    rows = NumberMember.objects.filter(number=access.number, pk=_parsed(member_id))
    if not access.manages:
        rows = rows.filter(user=access.user)
    found = rows.first()
    if found is None:
        raise NotFound()
    return found


def shared_numbers_of(*, user: User) -> list[NumberMember]:
    """The user's memberships of other people's numbers, each with its number, in the order
    they joined."""
    rows = NumberMember.objects.filter(user=user, status=MemberStatus.ACTIVE)
    return list(rows.select_related("number").order_by("joined_at", "pk"))


def shared_number_of(*, user: User, number_id: str | uuid.UUID) -> NumberMember:
    """The user's active membership of the number `number_id`, with its number; NotFound for
    a number of their own, one they are not an active member of, malformed or unknown."""
    rows = NumberMember.objects.filter(
        number_id=_parsed(number_id), user=user, status=MemberStatus.ACTIVE
    )
    found = rows.select_related("number").first()
    if found is None:
        raise NotFound()
    return found


def numbers_of(*, user: User) -> list[Number]:
    """The user's numbers, oldest first."""
    return numbers_by_owner(owner_ids=[user.pk]).get(user.pk, [])


def numbers_by_owner(*, owner_ids) -> dict:
    """The numbers of each of these users, oldest first, by owner pk, in one query; a user
    who holds none is left out."""
    numbers: dict = {}
    for number in Number.objects.filter(owner__in=set(owner_ids)).order_by("created_at", "id"):
        numbers.setdefault(number.owner_id, []).append(number)
    return numbers


def numbers_column(owner_ref=None) -> Subquery:
    """The numbers of a user as one column of a query of users (`owner_ref`: the user's pk
    in it, OuterRef("pk") by default), for numbers_from_column; NULL when they hold none."""
    rows = Number.objects.filter(owner=owner_ref or OuterRef("pk")).order_by().values("owner")
    return Subquery(
        rows.annotate(value=JSONList(JSONArray("id", "number", "created_at"))).values("value")
    )


def numbers_from_column(value: str | None) -> list[tuple[str, str]]:
    """(pk, e164) of each number in a value of numbers_column, oldest first (as
    numbers_by_owner orders them)."""
    rows = json.loads(value) if value else []
    return [(pk, e164) for pk, e164, _ in sorted(rows, key=lambda row: (row[2], row[0]))]


@dataclass(frozen=True)
class Greeting:
    """Which greeting a number's callers hear (GET /api/numbers/:id/greeting)."""

    active: str  # "recorded", "text" or "default"
    greeting: str
    recording_url: str | None
    recording_seconds: float | None

    @classmethod
    def of(cls, number: Number) -> "Greeting":
        if number.greeting_recording:
            return cls(
                active="recorded",
                greeting=number.greeting,
                recording_url=f"/api/numbers/{number.pk}/greeting/recording",
                recording_seconds=number.greeting_recording_seconds,
            )
        return cls(
            active="text" if number.greeting else "default",
            greeting=number.greeting,
            recording_url=None,
            recording_seconds=None,
        )


@dataclass(frozen=True)
class HoldMusic:
    """A number's uploaded music on hold, as PUT /api/numbers/:id/hold-music answers it."""

    hold_music_url: str
    hold_music_seconds: float

    @classmethod
    def of(cls, number: Number) -> "HoldMusic":
        return cls(f"/api/numbers/{number.pk}/hold-music", number.hold_music_seconds)


@dataclass(frozen=True)
class HoursSettings:
    """A number's opening hours as GET /api/numbers/:id/hours answers them; `time_zone` None:
    none are set, and the number is always open."""

    time_zone: str | None
    open_now: bool
    weekly: list = field(default_factory=list)
    closed_dates: list = field(default_factory=list)
    do_not_disturb: bool = False
    closed_greeting: str = ""
    closed_greeting_recording_url: str | None = None
    closed_greeting_recording_seconds: float | None = None

    @classmethod
    def of(cls, row: OpeningHours | None, *, at: datetime) -> "HoursSettings":
        if row is None:
            return cls(time_zone=None, open_now=True)
        recorded = bool(row.closed_greeting_recording)
        return cls(
            time_zone=row.time_zone,
            open_now=hours_open(row.hours(), at=at),
            weekly=row.weekly,
            closed_dates=row.closed_dates,
            do_not_disturb=row.do_not_disturb,
            closed_greeting=row.closed_greeting,
            closed_greeting_recording_url=(
                f"/api/numbers/{row.number_id}/hours/closed-greeting" if recorded else None
            ),
            closed_greeting_recording_seconds=row.closed_greeting_recording_seconds,
        )


def hours_open(hours: Hours, *, at: datetime) -> bool:
    """open_at, except that a stored zone this machine's zoneinfo no longer knows (a tzdata
    that dropped it) counts as open, logged: a number is never shut, nor its calls failed,
    by the time zone database."""
    try:
        return open_at(hours, at)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        logger.warning("opening hours in an unknown time zone are taken as open")
        return True


def hours_of(*, number: Number) -> OpeningHours | None:
    """The number's opening hours, or None when none are set (always open)."""
    return OpeningHours.objects.filter(number=number).first()


def number_closed(*, number: Number, at: datetime) -> Hours | None:
    """The number's hours when they say it is closed at the instant `at` (its calls then go
    straight to voicemail: telephony.inbound.routing), else None: open, or no hours set."""
    row = hours_of(number=number)
    if row is None:
        return None
    hours = row.hours()
    return None if hours_open(hours, at=at) else hours


def blocklist_of(*, number: Number) -> list[BlockedCaller]:
    """The callers blocked on `number`, in the order they were blocked."""
    return list(number.blocked_callers.order_by("created_at", "id"))


def inventory_counts() -> dict[str, int]:
    total = InventoryNumber.objects.count()
    held = Number.objects.count()
    return {"total": total, "held": held, "free": total - held}


def number_by_e164(*, e164: str) -> Number | None:
    """The held number `e164`, or None when it is not provisioned or nobody holds it."""
    return Number.objects.filter(number=e164).first()


def caller_blocked(*, number: Number, caller_num: str) -> bool:
    """Whether `caller_num` (E.164) is on `number`'s blocklist: the inbound desk refuses the
    call, and history records it `blocked`."""
    return BlockedCaller.objects.filter(number=number, caller_num=caller_num).exists()


def inventory_among(numbers) -> set[str]:
    """Which of `numbers` are Relay's own (the inventory, held or not): ringing one would
    come back to Relay, a loop."""
    return set(InventoryNumber.objects.filter(e164__in=numbers).values_list("e164", flat=True))


def targets_dialable(*, targets: list[str], owner: User) -> list[str]:
    """The targets Relay may ring on `owner`'s behalf now, in order: what was checked when
    they were set (a number's forwarding, a script's `dial`) is checked again, because the
    dialing policy, the owner's countries or the inventory may have changed since; a target
    named by a hook's answer was never checked before. Never a number of the inventory (the
    call would come back: a loop). Nothing is counted for fraud review here: the owner
    dialled nothing at this moment."""
    looping = inventory_among(targets)
    allowed = []
    for target in targets:
        if target in looping:
            continue
        try:
            dialing.destination_check(target, extra_countries=owner.extra_dial_countries)
        except dialing.DestinationNotAllowed:
            continue
        allowed.append(target)
    return allowed


def hold_music_file_name(number_id) -> str:
    """The name of a number's music on hold in the user's export archive."""
    return f"hold-music/{number_id}.wav"


def greeting_file_name(number_id, *, closed: bool = False) -> str:
    """The name of a number's recorded greeting (or `closed` greeting) in the user's export
    archive."""
    return f"greetings/{number_id}{'-closed' if closed else ''}.wav"


def numbers_export(*, user: User) -> dict:
    """The user's numbers for their export (core.userdata): each as the API answers it, with
    its greeting, its forwarding and ring list, its opening hours and its blocklist, oldest first;
    `greeting_file` names the recorded greeting in the archive (numbers_greeting_files), null
    when there is none, `closed_greeting_file` the recorded closed greeting and
    `hold_music_file` the uploaded music on hold."""

    def each():
        held = Number.objects.filter(owner=user).prefetch_related("blocked_callers")
        for number in held.order_by("created_at", "pk"):
            hours = hours_of(number=number)
            yield {
                **represent(NumberOutput, number),
                "greeting_file": (
                    greeting_file_name(number.pk) if number.greeting_recording else None
                ),
                "closed_greeting_file": (
                    greeting_file_name(number.pk, closed=True)
                    if hours is not None and hours.closed_greeting_recording
                    else None
                ),
                "hold_music_file": (hold_music_file_name(number.pk) if number.hold_music else None),
                "hold_music_seconds": number.hold_music_seconds,
                "forwarding": represent(ForwardingOutput, Forwarding.of(number)),
                "ringing": represent(RingingOutput, RingList.of(number)),
                "hours": represent(HoursOutput, HoursSettings.of(hours, at=timezone.now())),
                "blocked": [
                    represent(BlockedCallerOutput, entry)
                    for entry in sorted(number.blocked_callers.all(), key=lambda e: e.created_at)
                ],
            }

    return {"numbers": each(), "memberships": memberships_export(user=user)}


def memberships_export(*, user: User) -> list[dict]:
    """The numbers shared with the user, for their export: as GET /api/numbers/shared lists
    them."""
    return [represent(SharedNumberOutput, row) for row in shared_numbers_of(user=user)]


def numbers_greeting_files(*, user: User) -> list:
    """The recorded greetings of the user's numbers for their export: (name in the archive,
    opener) pairs, `greetings/<number id>.wav`, and `greetings/<number id>-closed.wav` for a
    closed greeting; and their music on hold, `hold-music/<number id>.wav`."""
    held = Number.objects.filter(owner=user).exclude(greeting_recording="").order_by("pk")
    closed = (
        OpeningHours.objects.filter(number__owner=user)
        .exclude(closed_greeting_recording="")
        .order_by("pk")
    )
    return (
        [
            (greeting_file_name(pk), recording_opener(name))
            for pk, name in held.values_list("pk", "greeting_recording")
        ]
        + [
            (greeting_file_name(pk, closed=True), recording_opener(name))
            for pk, name in closed.values_list("pk", "closed_greeting_recording")
        ]
        + [
            (hold_music_file_name(pk), recording_opener(name))
            for pk, name in Number.objects.filter(owner=user)
            .exclude(hold_music="")
            .order_by("pk")
            .values_list("pk", "hold_music")
        ]
    )
