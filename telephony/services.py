"""An inbound call's and its legs' part of the call ledger (calls.Call, calls.Leg): every write
the telephony agent makes of them, each in the transaction that reports it, so that every
inbound call ends in exactly one state, recorded once (history.services.inbound_call_ended)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from accounts.quotas import Admission, QuotaExceeded, quota_check, talk_grant, user_lock
from calls import services as ledger
from calls.models import AnsweredBy, Call, Direction, Leg, LegKind, LegRole, Outcome
from calls.states import ACTIVE_STATES, LegState
from core import events
from core.fields import to_ms
from core.webrtc import BROWSER
from history.models import AnsweredBy as RecordAnsweredBy
from history.records import Record
from history.services import inbound_call_ended
from realtime.pipeline import call_recovery_deadline, call_recovery_last_seen
from telephony import speech
from virtual_numbers.models import RING_ENTRY_KINDS, Number
from virtual_numbers.selectors import number_members_heard, targets_dialable
from virtual_numbers.services import ring_members, sip_target_problem

logger = logging.getLogger(__name__)


def incoming_call_event(*, call: Call, number: Number) -> dict:
    """The `incoming_call` frame: a call is ringing on one of the owner's numbers (`call`, its
    ledger id; `seq` 1, its ringing)."""
    return {
        "type": "incoming_call",
        "call": str(call.pk),
        "seq": call.last_seq,
        "number_id": str(number.pk),
        "number": number.number,
        "caller_num": call.caller_id,
        "ts": to_ms(call.created_at),
    }


def inbound_call_open(*, sip_call_id: str, number: Number, caller_num: str, ringing: bool):
    """The ledger's call of an inbound INVITE (calls.services.inbound_call_open); with
    `ringing`, push `incoming_call` to the owner after commit, and to the number's members
    (their sockets; their webhook and Matrix room when they turned those on: issue 57).
    None when this Call-ID was seen before (a re-sent INVITE): nothing is written, and the
    caller of this service must not record it again."""
    with transaction.atomic():
        call = ledger.inbound_call_open(
            sip_call_id=sip_call_id,
            number=number,
            caller_id=caller_num,
            at=timezone.now(),
            deadline=call_recovery_deadline(),
        )
        if call is not None and ringing:
            event = incoming_call_event(call=call, number=number)
            events.send_to_user_on_commit(user_id=number.owner_id, event=event)
            events.send_to_members_on_commit(
                members=number_members_heard(number_id=number.pk), event=event
            )
    return call


def inbound_call_answered(*, call: Call, by_app: bool = False) -> None:
    """The call is answered now, by voicemail (or `by_app`: the number's voice application)."""
    with transaction.atomic():
        ledger.call_answered(
            call=call,
            by=AnsweredBy.APP if by_app else AnsweredBy.VOICEMAIL,
            at=timezone.now(),
        )


def inbound_call_record(
    *,
    call: Call,
    status: str,
    duration: int = 0,
    recording: str = "",
    recording_seconds: float | None = None,
    answered_by: str | None = None,
) -> Record | None:
    """End the call in the state of its outcome `status` and write its one history record
    (history.services.inbound_call_ended), in one transaction. None when it ended already (by
    recovery, after this agent was taken for dead) or its number was deleted meanwhile: then
    no record is written. An answered call was answered by who answered it (Call.answered_by,
    or `answered_by` as the history record names it when given), else by voicemail. Its legs
    still up end with it (the bridged one with the call's duration)."""
    by = _answered_by(call, answered_by) if status == Outcome.ANSWERED else None
    return inbound_call_ended(
        call=call,
        status=status,
        duration=duration,
        answered_by=by,
        recording=recording,
        recording_seconds=recording_seconds,
    )


def _answered_by(call: Call, given: str | None) -> str:
    """Who answered an answered call: `given` (as the history record names it), else who the
    ledger says answered, else voicemail."""
    if given == RecordAnsweredBy.APP:
        return AnsweredBy.APP
    if given == RecordAnsweredBy.VOICEMAIL:
        return AnsweredBy.VOICEMAIL
    return call.answered_by or AnsweredBy.VOICEMAIL


def inbound_calls_recover() -> int:
    """End the inbound calls whose agent went silent (deadline passed, still up): `missed` if
    they were never answered, else `answered` up to the agent's last heartbeat (the message,
    if any, died with the agent). Safe beside other agents doing the same; returns how many
    this pass ended."""
    now = timezone.now()
    recorded = 0
    stale = Call.objects.filter(
        direction=Direction.INBOUND, status__in=ACTIVE_STATES, step_deadline__lt=now
    ).select_related("number")
    for call in stale.order_by("step_deadline")[:100]:
        if call.answered_at is None:
            status, duration = Outcome.MISSED, 0
        else:
            last_seen = call_recovery_last_seen(call.step_deadline)
            status = Outcome.ANSWERED
            duration = max(0, round((last_seen - call.answered_at).total_seconds()))
        before = call.status
        inbound_call_record(call=call, status=status, duration=duration)
        if call.status != before:
            recorded += 1
    return recorded


@dataclass(frozen=True)
class RingEntry:
    """An entry of a number's ring list as it rings now (ring_list_now): `kind` phone, sip
    or member, its `target` (the phone or URI; a member's user id), its `seconds`, its index
    `entry`, and for a member their `ring_phone` (empty: none)."""

    entry: int
    kind: str
    target: str
    seconds: int
    ring_phone: str = ""


def ring_list_now(*, number: Number, label: str = "") -> list[RingEntry]:
    """The number's ring list (Number.ring_entries) as it rings now, in order: an entry
    naming someone who is no longer the owner nor an active member is skipped, and logged
    (`label` names the call); a member's entry carries their profile's ring phone."""
    people = ring_members(number=number)
    phones = {
        str(pk): phone
        for pk, phone in User.objects.filter(pk__in=list(people)).values_list("pk", "ring_phone")
    }
    now = []
    for index, entry in enumerate(number.ring_entries):
        seconds = entry.get("ringSeconds", number.forward_ring_seconds)
        kind = next((k for k in RING_ENTRY_KINDS if k in entry), None)
        if kind is None:
            continue
        if kind == "member" and entry["member"] not in people:
            logger.info(
                "%s: ring list entry %d skipped: user %s is no member of the number now",
                label,
                index,
                entry["member"],
            )
            continue
        ring_phone = phones.get(entry["member"], "") if kind == "member" else ""
        now.append(RingEntry(index, kind, entry[kind], seconds, ring_phone))
    return now


def ring_member_ids(*, number_id) -> set[str]:
    """The user ids (as text) a member entry may still ring: the owner and active members."""
    number = Number.objects.filter(pk=number_id).only("owner_id").first()
    return set() if number is None else ring_members(number=number)


def number_hold_music(*, number_id) -> str:
    """The name of a number's music on hold in the recordings storage ("": none, or the
    number is gone)."""
    name = Number.objects.filter(pk=number_id).values_list("hold_music", flat=True).first()
    return name or ""


def forward_legs_open(
    *, call: Call, number: Number, sip_call_ids: dict[str, str], entries: dict | None = None
) -> list:
    """The legs to dial for `call` to `number`'s ring list (dial_legs_open): `sip_call_ids`
    names the phones and SIP URIs to dial now, `entries` each one's (entry index, member
    user id or None); tabs have no leg to dial (telephony.webrtc.ring)."""
    return dial_legs_open(
        owner_id=number.owner_id,
        targets=[target for target in sip_call_ids if target != BROWSER],
        sip_call_ids=sip_call_ids,
        call=call,
        role=LegRole.FORWARD_TARGET,
        entries=entries,
    )


def dial_legs_open(
    *,
    owner_id,
    targets: list[str],
    sip_call_ids: dict[str, str],
    call: Call,
    dial: int = 0,
    role: str = LegRole.DIAL_TARGET,
    entries: dict | None = None,
) -> list[Leg]:
    """The legs to dial for `call`, its n-th dial (`dial`; 0: the number's ring list), to
    `targets` (`sip_call_ids`: target -> the SIP Call-ID its INVITE will have), each written
    before its INVITE exists: only the targets still allowed (targets_dialable for phones;
    a SIP URI whose host is no private address unless allowed, sip_target_problem), while
    the owner's plan quotas allow another call, and never a target this dial of this call
    dialled before (the unique rows). `entries` gives a target's (ring list entry, member)
    for its row. The owner's row is locked meanwhile, as a submit locks it, and their use read
    once (quotas.Admission), each leg written counting in it as a call created and up."""
    entries = entries or {}
    uris = [t for t in targets if t.lower().startswith(("sip:", "sips:"))]
    phones = [t for t in targets if t not in uris]
    allowed = {uri for uri in uris if sip_target_problem(uri) is None}  # resolved: unlocked
    legs = []
    with transaction.atomic():
        owner = user_lock(owner_id)
        allowed |= set(targets_dialable(targets=phones, owner=owner))
        before = Leg.objects.filter(call=call, dial=dial).values_list("phone", "sip_uri")
        dialled = {value for pair in before for value in pair if value}
        admission = None  # the owner's use, read once for every leg (a ring list's several)
        for target in targets:
            if target not in allowed or target in dialled or target not in sip_call_ids:
                continue
            try:
                admission = admission or Admission(user=owner, now=timezone.now())
                admission.admit()
            except QuotaExceeded:
                break
            entry, member = entries.get(target, (None, None))
            uri = target in uris
            leg = ledger.leg_open(
                call=call,
                owner=owner,
                kind=LegKind.SIP,
                role=role,
                dial=dial,
                phone="" if uri else target,
                sip_uri=target if uri else "",
                user_id=member,
                ring_entry=entry,
                sip_call_id=sip_call_ids[target],
            )
            if leg is not None:
                legs.append(leg)
    return legs


def transfer_target_refusal(*, call: Call, target: str) -> str | None:
    """Why `call` may not be handed on to `target` (a phone or a SIP URI a bridged party
    named in a REFER, or a user by the API) now, in words for the REFER's 403; None when it
    may: the dialing policy and the inventory as for forwarding (targets_dialable), a SIP
    URI's host (sip_target_problem), and the owner's plan quotas (one more leg)."""
    owner = User.objects.get(pk=call.owner_id)
    if target.lower().startswith(("sip:", "sips:")):
        if problem := sip_target_problem(target):
            return problem
    elif not targets_dialable(targets=[target], owner=owner):
        return "the dialing policy does not allow this destination"
    try:
        quota_check(user=owner, now=timezone.now())
    except QuotaExceeded:
        return "a quota of the plan is used up"
    return None


def transfer_legs_open(
    *, call: Call, sip_call_ids: dict[str, str], role: str = LegRole.TRANSFER_TARGET
) -> list[Leg]:
    """The leg of a transfer of `call` (`sip_call_ids`: its one target -> its Call-ID):
    a `transfer_target` leg (`role`: a tab's consultation's is a `consult_target`), the
    call's dial one more than any of its legs had, so that a target rung before (by the ring
    list, or an earlier transfer or consultation) may be dialled again. The dialing policy
    and the quotas are checked again as it is written (dial_legs_open)."""
    with transaction.atomic():
        user_lock(call.owner_id)
        last = Leg.objects.filter(call=call).order_by("-dial").values_list("dial", flat=True)
        return dial_legs_open(
            owner_id=call.owner_id,
            targets=list(sip_call_ids),
            sip_call_ids=sip_call_ids,
            call=call,
            dial=(last.first() or 0) + 1,
            role=role,
        )


def consult_legs_open(*, call: Call, sip_call_ids: dict[str, str]) -> list[Leg]:
    """The leg of a tab's consultation of `call` (an attended transfer from the browser
    phone, issue 58): as transfer_legs_open, a `consult_target` leg."""
    return transfer_legs_open(call=call, sip_call_ids=sip_call_ids, role=LegRole.CONSULT_TARGET)


def consult_leg_completed(*, leg: Leg) -> None:
    """The tab that consulted `leg`'s target completed the transfer (issue 58): the caller is
    handed on to it, so the leg is the call's `transfer_target` from now on (history's
    `transferred_to`; no other transfer of the call)."""
    leg.role = LegRole.TRANSFER_TARGET
    leg.save(update_fields=["role"])


def forward_leg_bridged(*, call: Call, leg: Leg) -> int | None:
    """`leg` answered and is bridged to the caller: the call is answered, by a person on
    `leg`'s phone (so that recovery records it forwarded), and the leg is granted its talk
    (_leg_grant; 0 refuses the bridge)."""
    now = timezone.now()
    with transaction.atomic():
        grant = _leg_grant(leg, now)
        if grant != 0:
            ledger.call_answered(call=call, by=AnsweredBy.PERSON, at=now)
    return grant


def _leg_grant(leg: Leg, now) -> int | None:
    """In the caller's transaction: the talk the owner's plan grants `leg` as it is bridged
    (talk_grant: the seconds it may talk, None when unlimited, 0 refusing the bridge), the
    owner's row locked as a submit locks it; the leg answered with it unless refused."""
    owner = user_lock(leg.owner_id)
    grant = talk_grant(user=owner, call_pk=None, planned=None, now=now)
    if grant != 0:
        ledger.leg_move(
            leg=leg, new=LegState.ANSWERED, values={"answered_at": now, "talk_limit": grant}
        )
    return grant


def forward_leg_unbridged(*, call: Call, leg: Leg) -> None:
    """The caller hung up between forward_leg_bridged and the answer: nobody was bridged
    after all, the leg is over, and the call is not answered."""
    with transaction.atomic():
        dial_leg_unbridged(leg=leg)
        ledger.call_unanswered(call=call)


def forward_browser_bridged(*, call: Call, user_id=None, entry: int | None = None) -> None:
    """A tab of `user_id` (None: the owner) took `call` (the target "browser", ring list
    entry `entry`): a browser leg of the call, answered, and the call answered by the browser
    (so that recovery records it so). No talk grant: nothing goes out over the trunk, so
    nothing counts in the plan's quotas beyond the call itself."""
    now = timezone.now()
    with transaction.atomic():
        ledger.leg_open(
            call=call,
            owner_id=call.owner_id,
            kind=LegKind.BROWSER,
            role=LegRole.FORWARD_TARGET,
            user_id=user_id or call.owner_id,
            ring_entry=entry,
            answered_at=now,
        )
        ledger.call_answered(call=call, by=AnsweredBy.BROWSER, at=now)


def forward_browser_unbridged(*, call: Call) -> None:
    """The caller hung up as the tab took the call: the tab's leg is over, and the call is not
    answered."""
    with transaction.atomic():
        for leg in Leg.objects.filter(call=call, kind=LegKind.BROWSER, status=LegState.ANSWERED):
            dial_leg_unbridged(leg=leg)
        ledger.call_unanswered(call=call)


def dial_leg_bridged(*, leg: Leg) -> int | None:
    """A script's `dial` leg answered and is bridged to the call: granted its talk
    (_leg_grant; 0 refuses the bridge). The call itself is whatever it was (answered
    already, or answered by this bridge: its caller says so)."""
    with transaction.atomic():
        return _leg_grant(leg, timezone.now())


def dial_leg_unbridged(*, leg: Leg) -> None:
    """The call ended between the grant and the bridge: nothing was bridged, and the leg is
    over."""
    values = {"answered_at": None, "talk_limit": None, "ended_at": timezone.now(), "duration": 0}
    ledger.leg_move(leg=leg, new=LegState.ENDED, values=values)


def leg_ended(*, leg: Leg, duration: int = 0) -> None:
    """The leg's call is over (`duration`: seconds bridged); nothing for a leg over already."""
    if leg.status != LegState.ENDED:
        values = {"ended_at": timezone.now(), "duration": duration}
        ledger.leg_move(leg=leg, new=LegState.ENDED, values=values)


def dial_legs_settle() -> int:
    """End the `dial` legs of outbound calls that are over (calls.services.legs_settle)."""
    return ledger.legs_settle(at=timezone.now())


# How long ago a message may have been used and still be playing: the longest a call lives,
# and a margin for its ringing and its render.
SPEECH_IN_USE_MARGIN = 600


def speech_cache_purge() -> tuple[int, int]:
    """Bound the speech cache to TTS_CACHE_MAX_MB (speech.cache_trim): the messages used
    longest ago go first, and none used within a call's longest life (SIP_MAX_CALL_SECONDS
    and SPEECH_IN_USE_MARGIN). How many messages and bytes were removed."""
    in_use_since = time.time() - settings.SIP_MAX_CALL_SECONDS - SPEECH_IN_USE_MARGIN
    return speech.cache_trim(
        settings.TTS_CACHE_DIR,
        max_bytes=settings.TTS_CACHE_MAX_MB * 1_000_000,
        in_use_since=in_use_since,
    )
