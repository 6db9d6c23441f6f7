"""The inbound-call ledger (telephony.models.InboundCall): every write of it, each in the
transaction that reports it, so that every inbound call ends in exactly one history record."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.quotas import QuotaExceeded, quota_check, talk_grant, user_lock
from calls.states import TERMINAL_STATES
from core import events
from core.db import create_unless_taken
from core.errors import NotFound
from core.fields import to_ms
from core.webrtc import BROWSER
from history.models import AnsweredBy, CallRecord, CallStatus
from history.services import record_inbound_call
from realtime.pipeline import call_recovery_deadline, call_recovery_last_seen
from telephony import speech
from telephony.models import ForwardLeg, InboundCall
from virtual_numbers.models import Number
from virtual_numbers.selectors import targets_dialable


def incoming_call_event(*, call: InboundCall, number: Number) -> dict:
    """The `incoming_call` frame: a call is ringing on one of the owner's numbers."""
    return {
        "type": "incoming_call",
        "number_id": str(number.pk),
        "number": number.number,
        "caller_num": call.caller_num,
        "ts": to_ms(call.started_at),
    }


def inbound_call_open(*, sip_call_id: str, number: Number, caller_num: str, ringing: bool):
    """Start the ledger of an inbound call; with `ringing`, push `incoming_call` to the owner
    after commit. None when this Call-ID was seen before (a re-sent INVITE): nothing is
    written, and the caller of this service must not record it again."""
    with transaction.atomic():
        call = create_unless_taken(
            InboundCall.objects.create,
            sip_call_id=sip_call_id,
            number=number,
            caller_num=caller_num,
            deadline=call_recovery_deadline(),
        )
        if call is None:
            return None
        if ringing:
            events.send_to_user_on_commit(
                user_id=number.owner_id, event=incoming_call_event(call=call, number=number)
            )
    return call


def inbound_call_answered(*, call: InboundCall, by_app: bool = False) -> None:
    """The call is answered now (`by_app`: by the number's voice application)."""
    call.answered_at, call.answered_by_app = timezone.now(), by_app
    InboundCall.objects.filter(pk=call.pk).update(
        answered_at=call.answered_at, answered_by_app=by_app
    )


def inbound_call_record(
    *,
    call: InboundCall,
    status: str,
    duration: int = 0,
    recording: str = "",
    recording_seconds: float | None = None,
    answered_by: str | None = None,
) -> CallRecord | None:
    """Write the call's one history record (record_inbound_call) and close its ledger, in one
    transaction. None when it was recorded already (by recovery, after this agent was taken
    for dead) or its number was deleted meanwhile: then nothing is written. An answered call
    was answered by `answered_by` when given, else by the number's voice application if that
    answered it (`answered_by_app`: recovery's case), else by the target it was bridged to
    (`forwarded_to`), else by voicemail. Its forwarding legs still
    up end with it (the bridged one with the call's duration)."""
    with transaction.atomic():
        if not InboundCall.objects.filter(pk=call.pk, recorded=False).update(recorded=True):
            return None
        now = timezone.now()
        legs = ForwardLeg.objects.filter(call=call, ended_at__isnull=True)
        legs.filter(answered_at__isnull=False).update(ended_at=now, duration=duration)
        legs.update(ended_at=now, duration=0)
        if status != CallStatus.ANSWERED:
            answered_by = None
        elif answered_by is None and call.answered_by_app:
            answered_by = AnsweredBy.APP
        elif answered_by is None:
            answered_by = AnsweredBy.FORWARD if call.forwarded_to else AnsweredBy.VOICEMAIL
        try:
            return record_inbound_call(
                number=call.number,
                caller_num=call.caller_num,
                status=status,
                duration=duration,
                at=call.started_at,
                sip_call_id=call.sip_call_id,
                recording=recording,
                recording_seconds=recording_seconds,
                answered_by=answered_by,
                forwarded_to=call.forwarded_to if answered_by == AnsweredBy.FORWARD else None,
            )
        except NotFound:
            return None


def inbound_calls_extend(*, pks: list) -> None:
    """The heartbeat of the agent holding these calls: recovery leaves them alone."""
    InboundCall.objects.filter(pk__in=pks, recorded=False).update(deadline=call_recovery_deadline())


def inbound_calls_recover() -> int:
    """Record the calls whose agent went silent (deadline passed, not recorded): `missed` if
    they were never answered, else `answered` up to the agent's last heartbeat (the message,
    if any, died with the agent). Safe beside other agents doing the same; returns how many
    this pass recorded."""
    now = timezone.now()
    recorded = 0
    stale = InboundCall.objects.filter(recorded=False, deadline__lt=now).select_related("number")
    for call in stale[:100]:
        if call.answered_at is None:
            status, duration = CallStatus.MISSED, 0
        else:
            last_seen = call_recovery_last_seen(call.deadline)
            status = CallStatus.ANSWERED
            duration = max(0, round((last_seen - call.answered_at).total_seconds()))
        if inbound_call_record(call=call, status=status, duration=duration) is not None:
            recorded += 1
    return recorded


def forward_legs_open(*, call: InboundCall, number: Number, call_ids: dict[str, str]) -> list:
    """The legs to dial for `call` to `number`'s forwarding targets (dial_legs_open): its
    phones; the target "browser" has no leg to dial (telephony.webrtc.ring)."""
    phones = [target for target in number.forward_targets if target != BROWSER]
    return dial_legs_open(owner_id=number.owner_id, targets=phones, call_ids=call_ids, call=call)


def dial_legs_open(
    *,
    owner_id,
    targets: list[str],
    call_ids: dict[str, str],
    call: InboundCall | None = None,
    request=None,
    dial: int = 0,
) -> list:
    """The legs to dial for a call (an inbound `call` or an outbound `request`), `dial` its
    n-th dial (0: the number's forwarding), to `targets` (`call_ids`: target -> the SIP
    Call-ID its INVITE will have), each written before its INVITE exists: only the targets
    still allowed (targets_dialable), while the owner's plan quotas allow another call, and
    never a target this dial of this call dialled before (the unique row). The owner's row is
    locked meanwhile, as a submit locks it."""
    legs = []
    with transaction.atomic():
        owner = user_lock(owner_id)
        of_call = {"call": call} if call is not None else {"request": request}
        dialled = set(
            ForwardLeg.objects.filter(dial=dial, **of_call).values_list("target", flat=True)
        )
        for target in targets_dialable(targets=targets, owner=owner):
            if target in dialled or target not in call_ids:
                continue
            try:
                quota_check(user=owner, now=timezone.now())
            except QuotaExceeded:
                break
            legs.append(
                ForwardLeg.objects.create(
                    user=owner, target=target, sip_call_id=call_ids[target], dial=dial, **of_call
                )
            )
    return legs


def forward_leg_bridged(*, call: InboundCall, leg: ForwardLeg) -> int | None:
    """`leg` answered and is bridged to the caller: the call is answered, by `leg.target`
    (so that recovery records it forwarded), and the leg is granted its talk (_leg_grant;
    0 refuses the bridge)."""
    now = timezone.now()
    with transaction.atomic():
        grant = _leg_grant(leg, now)
        if grant == 0:
            return 0
        InboundCall.objects.filter(pk=call.pk).update(answered_at=now, forwarded_to=leg.target)
    call.answered_at, call.forwarded_to = now, leg.target
    return grant


def _leg_grant(leg: ForwardLeg, now) -> int | None:
    """In the caller's transaction: the talk the owner's plan grants `leg` as it is bridged
    (talk_grant: the seconds it may talk, None when unlimited, 0 refusing the bridge), the
    owner's row locked as a submit locks it; written on the leg unless refused."""
    owner = user_lock(leg.user_id)
    grant = talk_grant(user=owner, call_pk=None, planned=None, now=now)
    if grant != 0:
        ForwardLeg.objects.filter(pk=leg.pk).update(answered_at=now, talk_limit=grant)
        leg.answered_at, leg.talk_limit = now, grant
    return grant


def forward_leg_unbridged(*, call: InboundCall, leg: ForwardLeg) -> None:
    """The caller hung up between forward_leg_bridged and the answer: nobody was bridged
    after all, and the call is not answered."""
    with transaction.atomic():
        ForwardLeg.objects.filter(pk=leg.pk).update(answered_at=None, talk_limit=None)
        InboundCall.objects.filter(pk=call.pk).update(answered_at=None, forwarded_to="")
    leg.answered_at = leg.talk_limit = call.answered_at = None
    call.forwarded_to = ""


def forward_browser_bridged(*, call: InboundCall) -> None:
    """A tab of the owner took `call` (the target "browser"): the call is answered, by the
    browser (so that recovery records it forwarded there). No talk grant: nothing goes out
    over the trunk, so nothing counts in the plan's quotas beyond the call itself."""
    now = timezone.now()
    InboundCall.objects.filter(pk=call.pk).update(answered_at=now, forwarded_to=BROWSER)
    call.answered_at, call.forwarded_to = now, BROWSER


def forward_browser_unbridged(*, call: InboundCall) -> None:
    """The caller hung up as the tab took the call: the call is not answered."""
    InboundCall.objects.filter(pk=call.pk).update(answered_at=None, forwarded_to="")
    call.answered_at, call.forwarded_to = None, ""


def dial_leg_bridged(*, leg: ForwardLeg) -> int | None:
    """A script's `dial` leg answered and is bridged to the call: granted its talk
    (_leg_grant; 0 refuses the bridge). The call itself is whatever it was (answered
    already, or answered by this bridge: its caller says so)."""
    with transaction.atomic():
        return _leg_grant(leg, timezone.now())


def dial_leg_unbridged(*, leg: ForwardLeg) -> None:
    """The call ended between dial_leg_bridged and the bridge: nothing was bridged."""
    ForwardLeg.objects.filter(pk=leg.pk).update(answered_at=None, talk_limit=None)
    leg.answered_at = leg.talk_limit = None


def forward_leg_ended(*, leg: ForwardLeg, duration: int = 0) -> None:
    """The leg's call is over (`duration`: seconds bridged)."""
    ForwardLeg.objects.filter(pk=leg.pk, ended_at__isnull=True).update(
        ended_at=timezone.now(), duration=duration
    )


def dial_legs_settle() -> int:
    """End the `dial` legs of outbound calls that are over (their agent died with the legs
    up, and recovery ended the call): a leg left up would hold a place in the owner's quota
    of calls at once. Bridged legs keep what their call lasted at most. How many ended."""
    now = timezone.now()
    over = ForwardLeg.objects.filter(
        request__isnull=False, ended_at__isnull=True, request__status__in=TERMINAL_STATES
    )
    return over.update(ended_at=now, duration=Coalesce("talk_limit", Value(0)))


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
