"""Every write of outbound calls but the state machine's own: submit (idempotent per callId),
cancel, the telephony agent's claim and heartbeat, and the recount of the counters.

The WebSocket consumer, `POST /api/calls`, Matrix and the admin all come through here. Reads
are in realtime.selectors, the state machine (every change of a call's state) in
realtime.pipeline, the queue and recovery in realtime.tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from accounts import quotas
from accounts.models import DialRefusal, User
from accounts.services import refusals_record
from accounts.verification import EmailUnverified, email_verified_check
from calls import services as ledger
from calls.models import (
    AnsweredBy,
    Call,
    CallCounter,
    Direction,
    Leg,
    LegRole,
    Recording,
    TranscriptStatus,
)
from calls.states import ACTIVE_STATES, CallState, LegState
from core import dialing, events, ratelimit, taskqueue
from core.counters import Drift, counters_recount
from core.errors import ApplicationError, ErrorCode, InvalidRequest
from core.fields import validated
from core.phone import e164_valid
from core.platform.compiled import CompiledQuery
from core.recordings import recordings_delete_on_commit
from history.tasks import schedule_transcription, transcript_status_for
from realtime import pipeline, selectors, tasks
from realtime.providers import Step, get_provider
from realtime.serializers import BrowserCallInput, CallSubmitInput, CallTransferInput
from virtual_numbers.selectors import inventory_among
from virtual_numbers.services import dial_target_check, sip_target_problem
from voiceapps.verbs import dial_targets

logger = logging.getLogger(__name__)


def _caller_id_for(*, numbers: list[tuple], from_number: str | None) -> tuple[str | None, str]:
    """The number a call presents, out of the user's `numbers` ((pk, e164), oldest first):
    `from`, which must be one of them, else the oldest, else the service's caller id; as
    (the number's pk or None, the caller id)."""
    if from_number is not None:
        e164 = e164_valid(from_number)
        number = next((n for n in numbers if e164 and n[1] == e164), None)
        if number is None:
            raise InvalidRequest(
                "from must be one of your numbers.", fields={"from": ["Not one of your numbers."]}
            )
        return number
    if numbers:
        return numbers[0]
    return None, settings.SERVICE_CALLER_ID


@dataclass
class Submit:
    """One submit of a batch: who sent it, what they sent (a `call` frame, a POST /api/calls
    body or a Matrix `!call`), what to write with the call if it is created (`also`, in the
    same transaction), and where to collect what would be pushed after the commit (None:
    pushed as usual; core.events.collected_into)."""

    user: User
    data: object
    also: Callable[[Call], None] | None = None
    pushes: list | None = None
    browser: bool = False  # an `rtc_offer` frame: a call from the browser (BrowserCallInput)

    @property
    def key(self) -> tuple:
        """(user pk, callId), with None for a callId that is not a string (refused later)."""
        call_id = self.data.get("callId") if isinstance(self.data, dict) else None
        return (self.user.pk, call_id if isinstance(call_id, str) else None)


Outcome = tuple[Call, bool] | ApplicationError  # (call, created), or why it was refused


@dataclass
class _Checked:
    """A submit past the checks that need no lock: its index, values and caller id."""

    index: int
    values: dict
    number_pk: str | None
    caller_id: str


def call_submit(
    *, user: User, data, also: Callable[[Call], None] | None = None
) -> tuple[Call, bool]:
    """Submit a call from a `call` frame, a POST /api/calls body or a Matrix `!call`; return
    (call, created), or raise why it was refused. calls_submit with one submit."""
    outcome = calls_submit(submits=[Submit(user=user, data=data, also=also)])[0]
    if isinstance(outcome, ApplicationError):
        raise outcome
    return outcome


def calls_submit(*, submits: list[Submit]) -> list[Outcome]:
    """Submit calls that arrived together, in one transaction; return each one's Outcome, in
    order. Each submit is judged as if it were alone, and the guarantees are the same:

    - A call is committed, with its dispatch enqueued (and `also(call)`), when this returns
      (call, True) for it. Nothing is written for a refused one.
    - The same callId again for the same user creates nothing and returns the existing call,
      whatever the rest of the body (created False); also twice in one batch.
    - Otherwise the data is checked by CallSubmitInput (InvalidRequest naming every bad
      field); RateLimited past RATE_LIMIT_CALLS_PER_USER new calls; `from` must be one of
      the user's numbers (default: their oldest, else the service's caller id).
    - Then, under the users' row locks: EmailUnverified (403) while REQUIRE_EMAIL_VERIFICATION
      waits for the user's address; the dialing policy (DestinationNotAllowed,
      core.dialing) and the plan's quotas (QuotaExceeded, accounts.quotas), counted exactly
      however many submits race, the batch's earlier calls included. A refusal of the
      policy or a quota is counted for fraud review (accounts.services.refusals_record).

    One submit's refusal never touches another's outcome. Should the batch's transaction
    fail on a row a concurrent request wrote (IntegrityError), each submit is tried again
    alone; any other error (the database down) reaches the caller, with nothing written.

    The round trips are the same whatever the batch holds (tests/realtime/test_round_trips):
    one read of the users (their numbers, the callIds they used), every rate limit in one
    Redis pipeline, then the transaction (realtime.services._write); the rows of calls found
    again are read only when there are some.
    """
    outcomes: list[Outcome | None] = [None] * len(submits)
    known = selectors.submitters(
        owner_ids={submit.user.pk for submit in submits},
        call_ids={submit.key[1] for submit in submits if submit.key[1] is not None},
    )
    used = {
        submit.key
        for submit in submits
        if submit.user.pk in known and submit.key[1] in known[submit.user.pk].call_ids
    }
    found = selectors.calls_find(used) if used else {}
    valid: list[tuple[int, dict]] = []
    again: list[int] = []  # a callId already in this batch: tried after it, alone
    keys = set()
    for index, submit in enumerate(submits):
        if submit.key in found:
            outcomes[index] = (found[submit.key], False)
            continue
        if submit.key in keys and selectors.call_find_possible(submit.key[1]):
            again.append(index)
            continue
        keys.add(submit.key)
        try:
            if submit.browser and settings.TELEPHONY_PROVIDER != "sip":
                raise InvalidRequest("Calls from the browser need the SIP telephony agent.")
            shape = BrowserCallInput if submit.browser else CallSubmitInput
            valid.append((index, validated(shape, submit.data)))
        except ApplicationError as refused:
            outcomes[index] = refused
    # The rate limit of every valid submit, in one round trip to Redis.
    limited = ratelimit.hit_many(
        "calls:user",
        [str(submits[index].user.pk) for index, _ in valid],
        settings.RATE_LIMIT_CALLS_PER_USER,
    )
    # A script's dial targets that are Relay's own numbers (a loop): one read, only when a
    # script of the batch dials.
    dials = {index: dial_targets(values["script"] or []) for index, values in valid}
    looping = (
        inventory_among({t for targets in dials.values() for t in targets})
        if any(dials.values())
        else set()
    )
    checked: list[_Checked] = []
    for (index, values), refused in zip(valid, limited, strict=True):
        submitter = known.get(submits[index].user.pk)
        try:
            if refused is not None:
                raise refused
            if loop := next((t for t in dials[index] if t in looping), None):
                raise ApplicationError(
                    f"{loop} is a number of this service; ringing it would loop.",
                    code=ErrorCode.DESTINATION_NOT_ALLOWED,
                    fields={"script": [f"{loop} is a number of this service."]},
                )
            number_pk, caller_id = _caller_id_for(
                numbers=submitter.numbers if submitter else [], from_number=values.get("from")
            )
        except ApplicationError as refused:
            outcomes[index] = refused
            continue
        checked.append(_Checked(index, values, number_pk, caller_id))
    # What the outbox writers read of the owners, read with them (core.events).
    owned: dict[str, dict] = {}
    for pk, submitter in known.items():
        for name, value in submitter.owned.items():
            owned.setdefault(name, {})[str(pk)] = value
    if checked:
        try:
            _write(submits, checked, outcomes, owned)
        except IntegrityError:
            # A callId committed by a concurrent request between the read and the write:
            # each submit again alone; the one whose callId was taken finds that call.
            for one in checked:
                try:
                    _write(submits, [one], outcomes, owned)
                except IntegrityError:
                    submit = submits[one.index]
                    call = Call.objects.get(owner=submit.user, call_id=submit.key[1])
                    outcomes[one.index] = (call, False)
    for index in again:
        outcomes[index] = calls_submit(submits=[submits[index]])[0]
    return outcomes


def _write(submits: list[Submit], checked: list[_Checked], outcomes: list, owned: dict) -> None:
    """The locked part of calls_submit: the policy and quotas of each checked
    submit, then every call it admits written together. Fills `outcomes` once committed.

    A callId committed by a concurrent submit since calls_submit looked is the
    unique constraint's to catch (IntegrityError): a race rare enough not to cost every
    batch a read under the locks."""
    decided: dict[int, Outcome] = {}
    refusals = []
    with transaction.atomic(), taskqueue.enqueued_together():
        # Fresh rows: staff may have just changed a user's limits.
        owner_pks = {submits[one.index].user.pk for one in checked}
        owners = quotas.users_lock(owner_pks)
        now = timezone.now()
        uses = quotas.uses_of(owner_pks, now=now)  # under the locks: exact
        admissions: dict = {}  # owner pk -> quotas.Admission, made at the owner's first call
        admitted: list[tuple[int, Call]] = []
        for one in checked:
            submit = submits[one.index]
            owner = owners[submit.user.pk]
            try:
                # The locked row: a verification a moment ago counts, on an open socket too.
                email_verified_check(user=owner)
            except EmailUnverified as refused:
                decided[one.index] = refused
                continue
            try:
                # The number called, and every target its script may dial.
                for number in (one.values["to"], *dial_targets(one.values["script"] or [])):
                    dialing.destination_check(number, extra_countries=owner.extra_dial_countries)
                if owner.pk not in admissions:
                    admissions[owner.pk] = quotas.Admission(user=owner, now=now, use=uses[owner.pk])
                admissions[owner.pk].admit()
            except dialing.DestinationNotAllowed as refused:
                decided[one.index] = refused
                refusals.append((submit.user, DialRefusal.Kind.DESTINATION, refused.reason))
                continue
            except quotas.QuotaExceeded as refused:
                decided[one.index] = refused
                refusals.append((submit.user, DialRefusal.Kind.QUOTA, refused.quota))
                continue
            admitted.append((one.index, _new_call(submit.user, one, now)))
        calls = Call.objects.bulk_create([call for _, call in admitted])
        ledger.calls_created(calls, at=now)
        pipeline.push_statuses(
            calls, into=[submits[index].pushes for index, _ in admitted], owned=owned
        )
        for index, call in admitted:
            tasks.schedule_advance(call=call, expected_status=CallState.QUEUED)
            submit = submits[index]
            if submit.also is not None:
                with events.collected_into(submit.pushes):
                    submit.also(call)
            decided[index] = (call, True)
        # Last: the owners' counter rows stay locked only until the commit.
        ledger.calls_counted({pk: quota.admitted for pk, quota in admissions.items()})
    for index, outcome in decided.items():
        outcomes[index] = outcome  # committed: whatever follows cannot undo them
    try:
        refusals_record(refusals)
    except DatabaseError:
        logger.exception("%d refused call(s) were not counted for review", len(refusals))


def _new_call(user: User, one: _Checked, now) -> Call:
    values = one.values
    return Call(
        owner=user,
        call_id=values["callId"],
        to=values["to"],
        message=values.get("message", ""),
        script=values.get("script"),
        language=values.get("language") or settings.TTS_DEFAULT_LANGUAGE,
        status_callback=values.get("statusCallback", ""),
        machine_detection=values.get("machineDetection"),
        rtc_offer=values.get("rtc_offer", ""),
        number_id=one.number_pk,
        caller_id=one.caller_id,
        created_at=now,
        updated_at=now,
        step_deadline=pipeline.call_recovery_deadline(now=now),
    )


# --- cancel --------------------------------------------------------------------------------
def call_cancel(*, call: Call) -> Call:
    """Cancel a call that has not ended (one the caller reached through selectors.call_access):
    it ends `canceled` at once, and the provider hangs up what it placed (CANCEL while it
    rings, BYE once answered). `call_not_cancelable` once the call has ended."""
    step = Step(status=CallState.CANCELED, reason="canceled by the user")
    while not call.is_terminal:
        if pipeline.call_transition(call=call, step=step, expected_status=call.status):
            get_provider().hang_up(call)
            return call
        call.refresh_from_db()  # it moved on a moment ago: try again from where it is now
    raise ApplicationError(
        f"The call has already ended ({call.status}).", code=ErrorCode.CALL_NOT_CANCELABLE
    )


def browser_call_hang_up(*, user: User, call_id: str) -> None:
    """The `rtc_hangup` frame: the user's call from the browser `call_id` ends as a cancel ends
    it (NotFound for an unknown or another user's callId, InvalidRequest for a call that is not
    the browser's, `call_not_cancelable` once it has ended)."""
    call = selectors.call_access(user=user, call_id=call_id)
    if not call.rtc_offer:
        raise InvalidRequest("This call is not a call from the browser.")
    call_cancel(call=call)


def calls_end(*, user: User) -> None:
    """Account deletion (core.userdata): every call of `user` not yet ended ends `canceled`,
    hung up by the provider, before anything is erased. A call that ends otherwise at that
    moment (answered and hung up, failed) keeps that end: each call ends once. Inside the
    deletion's transaction, which holds the user's row, so no new call starts meanwhile."""
    mine = Call.objects.filter(owner=user, direction=Direction.OUTBOUND, status__in=ACTIVE_STATES)
    for call in mine.order_by("pk"):
        try:
            call_cancel(call=call)
        except ApplicationError as error:
            if error.code != ErrorCode.CALL_NOT_CANCELABLE:
                raise


def calls_erase(*, user: User) -> None:
    """Account deletion (core.userdata): every call of `user`, with its timeline, counters
    and recordings (their files once the deletion commits). Inside the deletion's
    transaction, after calls_end."""
    recordings = Recording.objects.filter(call__owner=user).values_list("name", flat=True)
    recordings_delete_on_commit(list(recordings))
    Call.objects.filter(owner=user).delete()
    CallCounter.objects.filter(owner=user).delete()


# --- the telephony agent's calls -----------------------------------------------------------
def call_recording_add(*, call: Call, recording_id, name: str, seconds: float) -> None:
    """What a `record` verb of the call's script recorded: the file `name`, saved already in
    the recordings storage, to be transcribed as voicemail is (history.tasks). A call gone
    meanwhile (its owner deleted their account) keeps nothing: the file is deleted too."""
    with transaction.atomic():
        if not Call.objects.filter(pk=call.pk).exists():
            recordings_delete_on_commit([name])
            return
        status = transcript_status_for(recording=name, seconds=seconds)
        Recording.objects.create(
            id=recording_id, call=call, name=name, seconds=seconds, transcript_status=status
        )
        if status == TranscriptStatus.PENDING:
            schedule_transcription(recording_id)


def _queued_query():
    return Call.objects.filter(status=CallState.QUEUED).order_by().values("pk")[:1]


# Compiled once per process: an agent with room asks every SIP_POLL_INTERVAL (20 times a
# second by default) and nearly always finds nothing; building the claim's queryset cost
# ten times running this (docs/benchmarks.md, sip_ring_group).
_ANY_QUEUED = CompiledQuery(_queued_query)


def calls_claim(*, limit: int, sip_call_id: Callable[[], str]) -> list[Call]:
    """The due calls a telephony agent won, at most `limit`, oldest first: each moved
    queued -> dialing (call_transition) and committed, with its SIP Call-ID
    (`sip_call_id()`) recorded, before the agent's INVITE exists. Of agents claiming at
    once only one wins a call (the conditional UPDATE), so no call is dialled twice.
    Nothing queued (the usual answer) is found by one compiled statement."""
    if not _ANY_QUEUED.rows():
        return []
    # Oldest first, by step_deadline (set at submit): the partial index of active calls.
    due = Call.objects.filter(status=CallState.QUEUED).order_by("step_deadline")
    claimed = []
    for record in due[:limit]:
        step = Step(status=CallState.DIALING, sip_call_id=sip_call_id())
        if pipeline.call_transition(call=record, step=step, expected_status=CallState.QUEUED):
            claimed.append(record)
    return claimed


def calls_extend(*, pks: list) -> None:
    """The heartbeat of the agent holding these calls: the ones still active get a fresh
    deadline (call_recovery_deadline), so recovery leaves them alone while the agent lives
    and takes them (agent_lost) soon after it dies."""
    Call.objects.filter(pk__in=pks, status__in=ACTIVE_STATES).update(
        step_deadline=pipeline.call_recovery_deadline()
    )


# --- counters ------------------------------------------------------------------------------
def call_counters_recount() -> list[Drift]:
    """Recount every call counter from the calls and correct the ones that drifted (safe
    beside live writers: core.counters.counters_recount); return the corrections."""
    outbound = Call.objects.filter(direction=Direction.OUTBOUND)
    return counters_recount(outbound, CallCounter, ["owner_id", "status"])


TRANSFERABLE_BY = (AnsweredBy.PERSON, AnsweredBy.BROWSER)


def call_transfer(*, user: User, call_ref: str, data) -> tuple[Call, str]:
    """`POST /api/calls/:call/transfer` (issue 58): hand the other party of a bridged call on
    to `to` (a blind transfer). Either an inbound call, bridged now to one of its number's
    phones or tabs, or to whoever it was handed on to last (a second transfer), for its
    number's owner or an active member; or an outbound call `user` placed from the browser
    (`call_ref` its callId or ledger id), the tab bridged to the callee, or the callee to
    whoever it was handed on to. `call_ref` of anything else is NotFound. Checked here: the
    shape of `to` (400 naming it), the rate of calls (RATE_LIMIT_CALLS_PER_USER: a transfer
    dials), the dialing policy and inventory as for forwarding (destination_not_allowed, a
    SIP URI's host), and that the call is in progress and bridged, with no transfer ringing
    and no consultation under way (else call_not_transferable; an outbound call that plays a
    message or runs a script always is). The agent holding the call is told through the
    channel layer (events.call_group) once this commits; it checks the target again as the
    owner (quotas too) and dials it. Returns the call and the target."""
    call = selectors.call_transferable_find(user=user, call_ref=call_ref)
    if call.direction == Direction.OUTBOUND:
        to = _outbound_handing_on(user=user, call=call, data=data)
    else:
        to = _handing_on(user=user, call=call, data=data, consult=False)
    events.send_on_commit(events.call_group(call.pk), {"type": "call.transfer", "to": to})
    logger.info("call %s: a transfer asked for by user %s", call.pk, user.pk)
    return call, to


def _target_checked(*, user: User, owner: User, data) -> str:
    """The `to` of a transfer or consultation, checked as the owner would dial it (the shape,
    the policy, a SIP URI's host), the rate of calls counted for `user`."""
    values = validated(CallTransferInput, data)
    to = values["to"]
    ratelimit.hit("calls:user", str(user.pk), settings.RATE_LIMIT_CALLS_PER_USER)
    if to.startswith(("sip:", "sips:")):
        if problem := sip_target_problem(to):
            raise ApplicationError(
                problem, code=ErrorCode.DESTINATION_NOT_ALLOWED, fields={"to": [problem]}
            )
    else:
        dial_target_check(owner=owner, target=to, field="to")
    return to


def _transfer_ringing(call: Call) -> bool:
    """Whether a transfer of `call` is dialling its target now (the target not answered)."""
    return (
        Leg.objects.filter(call=call, role=LegRole.TRANSFER_TARGET, answered_at__isnull=True)
        .exclude(status=LegState.ENDED)
        .exists()
    )


def _outbound_handing_on(*, user: User, call: Call, data) -> str:
    """The checks of a transfer of an outbound call (call_transfer): a call from the browser
    (one that plays a message or runs a script has no bridge to hand on: never transferable),
    in progress, no transfer of it ringing."""
    to = _target_checked(user=user, owner=user, data=data)
    if not call.rtc_offer:
        raise ApplicationError(
            "Only a call placed from the browser can be handed on: this one plays a message "
            "or runs a script.",
            code=ErrorCode.CALL_NOT_TRANSFERABLE,
        )
    if call.status != CallState.IN_PROGRESS or _transfer_ringing(call):
        raise ApplicationError(
            f"The call is not in progress with its callee bridged now ({call.status}).",
            code=ErrorCode.CALL_NOT_TRANSFERABLE,
        )
    return to


def call_consult(*, user: User, call_ref: str, data) -> tuple[Call, str]:
    """`call_consult` (issue 58, an attended transfer from the browser phone): the tab that
    took the inbound call `call_ref` consults `to` before handing the caller on. Checked as
    call_transfer checks a transfer (NotFound, the shape and the dialing policy of `to`, the
    rate of calls, call_not_transferable), and the call must have been taken by a tab. The
    caller (the socket) passes the consultation on to the agent of the tab's ring, which
    checks the target again as the owner (quotas too). Returns the call and the target."""
    call = selectors.inbound_call_reachable(user=user, call_ref=call_ref)
    to = _handing_on(user=user, call=call, data=data, consult=True)
    logger.info("call %s: a consultation asked for by user %s", call.pk, user.pk)
    return call, to


def call_consult_decide(*, user: User, call_ref: str, complete: bool) -> Call:
    """`call_consult_complete` (`complete`) or `call_consult_cancel` of the consultation under
    way on the inbound call `call_ref` (NotFound as call_transfer). No consultation leg
    dialled and not over: no_consult; completing one whose target has not answered yet:
    consult_not_answered (cancelling it is fine). Returns the call; the socket tells the agent."""
    call = selectors.inbound_call_reachable(user=user, call_ref=call_ref)
    consult = (
        Leg.objects.filter(call=call, role=LegRole.CONSULT_TARGET)
        .exclude(status=LegState.ENDED)
        .order_by("-dial")
        .first()
    )
    if consult is None or call.status != CallState.IN_PROGRESS:
        raise ApplicationError(
            "No consultation is under way on this call.", code=ErrorCode.NO_CONSULT
        )
    if complete and consult.answered_at is None:
        raise ApplicationError(
            "The consultation's target has not answered yet: cancel it, or wait.",
            code=ErrorCode.CONSULT_NOT_ANSWERED,
        )
    return call


def _handing_on(*, user: User, call: Call, data, consult: bool) -> str:
    """The checks a transfer and a consultation (`consult`) of the inbound `call` share
    (call_transfer); returns the target. Bridged: a leg of the ring list, or of a transfer
    (the call handed on before: its target may hand it on again), answered and not ended;
    a consultation is a tab's alone, so only the ring list's (the tab's) will do."""
    owner = User.objects.get(pk=call.owner_id)
    to = _target_checked(user=user, owner=owner, data=data)
    by = (AnsweredBy.BROWSER,) if consult else TRANSFERABLE_BY
    roles = (
        (LegRole.FORWARD_TARGET,) if consult else (LegRole.FORWARD_TARGET, LegRole.TRANSFER_TARGET)
    )
    live = Leg.objects.filter(call=call).exclude(status=LegState.ENDED)
    bridged = live.filter(role__in=roles, answered_at__isnull=False).exists()
    # A consultation may follow another that went back to the tab, and a transfer may follow
    # one taken (the new party hands it on again); never two at once.
    busy = _transfer_ringing(call) or live.filter(role=LegRole.CONSULT_TARGET).exists()
    if consult:
        busy = busy or Leg.objects.filter(call=call, role=LegRole.TRANSFER_TARGET).exists()
    if call.status != CallState.IN_PROGRESS or call.answered_by not in by or not bridged or busy:
        raise ApplicationError(
            f"The call is not bridged to one of its number's phones or tabs now ({call.status}).",
            code=ErrorCode.CALL_NOT_TRANSFERABLE,
        )
    return to
