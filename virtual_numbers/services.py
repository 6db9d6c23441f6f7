"""Every write on numbers: inventory, creation behind the CAPTCHA, alias, PIN, greetings,
forwarding, opening hours, deletion, and the people a number is shared with (members and
invitations)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import phonenumbers
from django.conf import settings
from django.contrib.auth.hashers import check_password, make_password
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.errors import email_address_checked
from accounts.models import DialRefusal, User, UserManager
from accounts.services import refusal_record
from accounts.verification import email_verified_check
from captcha.services import captcha_token_consume
from core import dialing, ratelimit
from core.audio import wav_for_calls
from core.db import create_unless_taken
from core.errors import ApplicationError, ErrorCode, InvalidRequest, NotFound, RateLimited
from core.passwords import password_hashing_slot
from core.phone import e164_problem, e164_valid
from core.recordings import recordings_delete_on_commit, recordings_storage
from core.urls import destination_problem
from core.webrtc import BROWSER
from mail.services import mail_queue
from virtual_numbers.models import (
    FORWARD_RING_SECONDS_DEFAULT,
    GREETING_PREFIX,
    HOLD_MUSIC_PREFIX,
    INVITATION_DAYS,
    MEMBERS_MAX_PER_NUMBER,
    BlockedCaller,
    ForwardCallerId,
    InventoryNumber,
    MemberRole,
    MemberStatus,
    Number,
    NumberMember,
    OpeningHours,
    PinFailure,
    RingStrategy,
)

logger = logging.getLogger(__name__)

PIN_FAILURE_LIMIT = 5
PIN_FAILURE_WINDOW = timedelta(minutes=15)
ALLOCATION_ATTEMPTS = 8
BLOCKLIST_MAX_PER_NUMBER = 500


class PinMismatch(ApplicationError):
    code, message = ErrorCode.PIN_MISMATCH, "The current PIN is wrong."


class PinLocked(RateLimited):
    code = ErrorCode.PIN_LOCKED
    message = "Too many wrong PINs: PIN changes for this number are locked for a while."

    def __init__(self, retry_after: int):
        super().__init__(retry_after, limit=PIN_FAILURE_LIMIT)


# --- inventory -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ProvisionResult:
    added: int
    existing: int
    invalid: int


def inventory_provision(*, start: str, count: int) -> ProvisionResult:
    """Add `count` consecutive numbers from `start` to the inventory.

    Each is validated with phonenumbers (invalid ones are skipped and counted); numbers that
    exist already are skipped. Raises InvalidRequest when `start` itself is not a valid number,
    saying why (core.phone.e164_problem).
    """
    first = e164_valid(start)
    if first is None:
        raise InvalidRequest(f"{start!r}: {e164_problem(start, assigned=True)}")
    if count < 1:
        raise InvalidRequest("count must be at least 1.")
    parsed = phonenumbers.parse(first, None)
    width = len(str(parsed.national_number))
    candidates, invalid = [], 0
    for offset in range(count):
        national = parsed.national_number + offset
        if len(str(national)) > width:
            invalid += count - offset  # ran past the end of the numbering block
            break
        e164 = e164_valid(f"+{parsed.country_code}{national}")
        if e164 is None:
            invalid += 1
        else:
            candidates.append(e164)
    existing = set(
        InventoryNumber.objects.filter(e164__in=candidates).values_list("e164", flat=True)
    )
    fresh = [InventoryNumber(e164=e) for e in candidates if e not in existing]
    InventoryNumber.objects.bulk_create(fresh, batch_size=1000, ignore_conflicts=True)
    return ProvisionResult(added=len(fresh), existing=len(existing), invalid=invalid)


def _free_inventory():
    """Entries no number holds, out of quarantine."""
    rested = Q(free_from__isnull=True) | Q(free_from__lte=timezone.now())
    return InventoryNumber.objects.filter(rested, holding__isnull=True)


def inventory_quarantine_end(*, entries) -> int:
    """Staff action: free the quarantined entries among `entries` at once (a number given
    back by mistake). Returns how many were in quarantine."""
    return entries.filter(free_from__gt=timezone.now()).update(free_from=None)


def _random_free_entry() -> InventoryNumber | None:
    """A random free entry, or None when none is free.

    Count and pick are two reads: other requests may take entries in between, so a pick past
    the shrunken end falls back to the first free entry instead of failing.
    """
    free = _free_inventory().order_by("pk")
    total = free.count()
    if not total:
        return None
    offset = secrets.randbelow(total)
    picked = list(free[offset : offset + 1])
    return picked[0] if picked else free.first()


# --- numbers -------------------------------------------------------------------------------
def _allocate(*, owner: User, alias: str, pin_hash: str, preferred: str | None = None) -> Number:
    """Inside the caller's transaction: give `owner` the free entry `preferred` if there is
    one, else a random free entry, or 503."""
    for attempt in range(ALLOCATION_ATTEMPTS):
        entry = None
        if preferred and attempt == 0:
            entry = _free_inventory().filter(e164=preferred).first()
        entry = entry or _random_free_entry()
        if entry is None:
            break
        number = create_unless_taken(
            Number.objects.create,
            owner=owner,
            inventory=entry,
            number=entry.e164,
            alias=alias,
            pin_hash=pin_hash,
        )
        if number is not None:
            return number
        # Otherwise another request took this entry a moment ago: pick again.
    raise ApplicationError(
        "No numbers are available right now. Try again later.",
        code=ErrorCode.NO_NUMBERS_AVAILABLE,
    )


def _lock_user(user: User) -> User:
    """The user's row, locked until the transaction ends: one creation per user at a time."""
    return User.objects.select_for_update().get(pk=user.pk)


def _refuse_past_limit(locked_user: User) -> None:
    """Raise number_limit_reached if the (locked) user's plan is already full."""
    if Number.objects.filter(owner=locked_user).count() >= locked_user.number_limit:
        raise ApplicationError(
            f"Your plan allows {locked_user.number_limit} numbers; delete one first.",
            code=ErrorCode.NUMBER_LIMIT_REACHED,
        )


def number_create(*, user: User, alias: str, pin: str, captcha_token: str) -> Number:
    """Give `user` a random free inventory number, spending the CAPTCHA token.

    All in one transaction with the user's row locked, so the per-plan limit holds under
    concurrent requests. First, 403 email_unverified while REQUIRE_EMAIL_VERIFICATION waits
    for the user's address (the token is left unspent). Then the token: 400 captcha_invalid
    for an unknown, spent or expired token whatever the user holds; then 409
    number_limit_reached past the plan's limit, 503 no_numbers_available when the inventory
    is empty. Either of those rolls the transaction back, so the token is spent only if the
    number is created. Before all that, PasswordHashingBusy (503) when every hashing slot of
    the process is taken.
    """
    with password_hashing_slot():
        pin_hash = make_password(pin)  # slow by design: hash before taking any lock
    with transaction.atomic():
        locked_user = _lock_user(user)
        email_verified_check(user=locked_user)  # a fresh row: a verification a moment ago counts
        captcha_token_consume(token=captcha_token)
        _refuse_past_limit(locked_user)
        return _allocate(owner=locked_user, alias=alias, pin_hash=pin_hash)


def number_grant(*, user: User, alias: str, pin: str, preferred: str | None = None) -> Number:
    """Operator path (seed and admin commands): like number_create, without a CAPTCHA.

    The CAPTCHA keeps bots off the public API; operators are trusted. The plan limit and
    the inventory rules still hold. `preferred` (E.164) is taken when it is free; otherwise
    the number is random, as on the API.
    """
    pin_hash = make_password(pin)
    with transaction.atomic():
        locked_user = _lock_user(user)
        _refuse_past_limit(locked_user)
        return _allocate(owner=locked_user, alias=alias, pin_hash=pin_hash, preferred=preferred)


def _locked(number: Number) -> Number:
    """`number` again, row-locked for the caller's transaction; NotFound if it is gone."""
    locked = Number.objects.select_for_update().filter(pk=number.pk, owner_id=number.owner_id)
    found = locked.first()
    if found is None:
        raise NotFound()
    return found


def number_alias_set(*, number: Number, alias: str) -> Number:
    """Rename a number (one the caller reached through selectors.number_access)."""
    if not Number.objects.filter(pk=number.pk).update(alias=alias):
        raise NotFound()  # deleted a moment ago
    number.alias = alias
    return number


def _pin_lock_retry_after(*, number: Number, now) -> int | None:
    """Seconds until PIN changes unlock, or None while fewer than 5 recent failures exist."""
    recent = list(
        PinFailure.objects.filter(number=number, created_at__gt=now - PIN_FAILURE_WINDOW)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:PIN_FAILURE_LIMIT]
    )
    if len(recent) < PIN_FAILURE_LIMIT:
        return None
    unlock_at = recent[-1] + PIN_FAILURE_WINDOW
    return max(1, int((unlock_at - now).total_seconds()) + 1)


def _pin_rehash_if_matches(number: Number, current_pin: str, new_pin: str) -> str | None:
    """The hash of `new_pin` if `current_pin` is the number's PIN, else None: both hashes in
    one hashing slot (PasswordHashingBusy before either runs)."""
    with password_hashing_slot():
        if not check_password(current_pin, number.pin_hash):
            return None
        return make_password(new_pin)


def _pin_matches(number: Number, pin: str) -> bool:
    with password_hashing_slot():
        return check_password(pin, number.pin_hash)


def _pin_checked(*, number: Number, check) -> Number:
    """Run `check(locked_number)` (True: the PIN was right) under the number's row lock and
    its PIN lock, shared by every way a PIN is tried (the REST PIN change, the mailbox by
    phone). Five wrong PINs within 15 minutes lock the number until the window has moved on:
    PinLocked (Retry-After), even for the right PIN. A failure is committed before PinMismatch
    is raised, so the count survives it; parallel guesses cannot overshoot."""
    outcome: ApplicationError | None = None
    with transaction.atomic():
        number = _locked(number)
        now = timezone.now()
        retry_after = _pin_lock_retry_after(number=number, now=now)
        if retry_after is not None:
            outcome = PinLocked(retry_after)
        elif not check(number):
            PinFailure.objects.create(number=number, created_at=now)
            retry_after = _pin_lock_retry_after(number=number, now=now)
            outcome = PinLocked(retry_after) if retry_after is not None else PinMismatch()
    if outcome is not None:
        raise outcome
    return number


def number_pin_change(*, number: Number, current_pin: str, new_pin: str) -> None:
    """Change the PIN after checking the current one (constant-time hash comparison).

    PinMismatch (403) for a wrong current PIN, PinLocked (429, Retry-After) while the
    number's PIN lock holds (`_pin_checked`: the lock the mailbox shares).
    PasswordHashingBusy (503) when every hashing slot of the process is taken; then the PIN
    is neither checked nor changed, and no failure is counted.
    """

    def check(locked: Number) -> bool:
        new_hash = _pin_rehash_if_matches(locked, current_pin, new_pin)
        if new_hash is None:
            return False
        locked.pin_hash = new_hash
        locked.save(update_fields=["pin_hash"])
        return True

    _pin_checked(number=number, check=check)


def number_pin_verify(*, number: Number, pin: str) -> None:
    """Check `pin` against the number's PIN (the mailbox, by phone), under the same lock as
    number_pin_change: a wrong PIN here counts towards it, and a lock taken over REST holds
    here too. Returns when the PIN is right; PinMismatch, PinLocked or PasswordHashingBusy
    otherwise. The PIN is never logged."""
    _pin_checked(number=number, check=lambda locked: _pin_matches(locked, pin))


def number_greeting_set(*, number: Number, greeting: str) -> Number:
    """Set what voicemail says to the number's callers (0-500 characters, checked by
    GreetingField); empty restores the service's default greeting."""
    if not Number.objects.filter(pk=number.pk).update(greeting=greeting):
        raise NotFound()  # deleted a moment ago
    number.greeting = greeting
    return number


def number_recording_set(*, number: Number, enabled: bool, announce: str) -> Number:
    """Record the number's forwarded calls or not (issue 58), and what both parties hear
    first (0-500 characters, checked by GreetingField; empty: RECORDING_ANNOUNCEMENT)."""
    values = {"recording_enabled": enabled, "recording_announce": announce}
    if not Number.objects.filter(pk=number.pk).update(**values):
        raise NotFound()  # deleted a moment ago
    number.recording_enabled, number.recording_announce = enabled, announce
    return number


def _greeting_recording_of(locked: Number, *, closed: bool) -> tuple[QuerySet, str]:
    """Where a recorded greeting of the number is kept: its usual one on the number, its
    closed one on its opening hours (no row: no hours, nowhere to keep one)."""
    if closed:
        return OpeningHours.objects.filter(number=locked), "closed_greeting_recording"
    return Number.objects.filter(pk=locked.pk), "greeting_recording"


def number_greeting_recording_set(
    *, number: Number, name: str, seconds: float, closed: bool = False
) -> Number:
    """Make the recording `name` (a WAV file already in the recordings storage, named under
    GREETING_PREFIX, `seconds` long) what voicemail plays to the number's callers in place of
    the spoken greeting (the mailbox's "press 3", by phone), or with `closed` in place of the
    spoken closed greeting while the number is closed (the mailbox's 4). The recording it
    replaces is deleted once this commits. NotFound when the number is gone, or with `closed`
    has no opening hours; then `name` is deleted too, since nothing will ever name it.
    ValueError for a name outside GREETING_PREFIX, which history's purge of unnamed files
    would take for a stray voicemail."""
    if not name.startswith(GREETING_PREFIX):
        raise ValueError(f"a greeting recording is stored under {GREETING_PREFIX}")
    try:
        with transaction.atomic():
            rows, field = _greeting_recording_of(_locked(number), closed=closed)
            replaced = rows.values_list(field, flat=True).first()
            if replaced is None or not rows.update(**{field: name, f"{field}_seconds": seconds}):
                raise NotFound()  # no hours (closed), or removed a moment ago
            recordings_delete_on_commit([replaced] if replaced != name else [])
    except NotFound:
        recordings_delete_on_commit([name])  # outside the rolled-back block: it happens
        raise
    if not closed:
        number.greeting_recording, number.greeting_recording_seconds = name, seconds
    return number


def number_greeting_recording_remove(*, number: Number, closed: bool = False) -> Number:
    """Callers hear the spoken greeting again (the number's text, or the default), or with
    `closed` the spoken closed greeting while the number is closed: the recording is
    forgotten and its file deleted once this commits. NotFound when there is no such
    recording, or the number is gone."""
    with transaction.atomic():
        rows, field = _greeting_recording_of(_locked(number), closed=closed)
        recorded = rows.select_for_update().values_list(field, flat=True).first()
        if not recorded:
            raise NotFound()
        rows.update(**{field: "", f"{field}_seconds": None})
        recordings_delete_on_commit([recorded])
    if not closed:
        number.greeting_recording, number.greeting_recording_seconds = "", None
    return number


def number_hold_music_set(*, number: Number, wav: bytes) -> Number:
    """Make the WAV file `wav` the music the number's forwarded calls play to a party whose
    other end holds, in place of Relay's own (issue 58): checked and converted to 8 kHz,
    16-bit, mono (core.audio.wav_for_calls: InvalidRequest for a file that is not a WAV, holds
    no audio or is longer than HOLD_MUSIC_MAX_SECONDS), stored in the recordings storage
    under HOLD_MUSIC_PREFIX, and the music it replaces deleted once this commits. Rate
    limited per owner like forwarding (RATE_LIMIT_FORWARDING_PER_USER, counted apart).
    NotFound when the number is gone; then the new file is deleted too."""
    ratelimit.hit("hold_music:user", str(number.owner_id), settings.RATE_LIMIT_FORWARDING_PER_USER)
    audio, seconds = wav_for_calls(wav, max_seconds=settings.HOLD_MUSIC_MAX_SECONDS)
    name = recordings_storage().save(
        f"{HOLD_MUSIC_PREFIX}{uuid.uuid4().hex}.wav", ContentFile(audio)
    )
    try:
        with transaction.atomic():
            replaced = _locked(number).hold_music
            Number.objects.filter(pk=number.pk).update(hold_music=name, hold_music_seconds=seconds)
            recordings_delete_on_commit([replaced])
    except NotFound:
        recordings_delete_on_commit([name])  # outside the rolled-back block: it happens
        raise
    number.hold_music, number.hold_music_seconds = name, seconds
    return number


def number_hold_music_remove(*, number: Number) -> Number:
    """The number's forwarded calls play Relay's own music on hold again: its uploaded music
    is forgotten and its file deleted once this commits. NotFound when it has none, or the
    number is gone."""
    with transaction.atomic():
        music = _locked(number).hold_music
        if not music:
            raise NotFound()
        Number.objects.filter(pk=number.pk).update(hold_music="", hold_music_seconds=None)
        recordings_delete_on_commit([music])
    number.hold_music, number.hold_music_seconds = "", None
    return number


@dataclass(frozen=True, kw_only=True)
class RingSettings:
    """How a number's calls ring, whoever they ring: forwarding and the ring list share these
    (Number.forward_ring_seconds, _screening, _caller_id)."""

    ring_seconds: int = FORWARD_RING_SECONDS_DEFAULT
    screening: bool = False
    caller_id: str = ForwardCallerId.CALLER

    @staticmethod
    def stored(number: Number) -> dict:
        """The settings as the number stores them."""
        return {
            "ring_seconds": number.forward_ring_seconds,
            "screening": number.forward_screening,
            "caller_id": number.forward_caller_id,
        }

    @staticmethod
    def given(data: dict) -> dict:
        """The settings as an input serializer validated them (the API's names)."""
        return {
            "ring_seconds": data["ringSeconds"],
            "screening": data["screening"],
            "caller_id": data["callerId"],
        }


@dataclass(frozen=True)
class Forwarding(RingSettings):
    """Where a number forwards its calls, as PUT .../forwarding names it: the phones of its
    ring list, and "browser" for the owner's own entry (Number.forward_targets); no targets:
    off. The ring list is the one storage (RingList): forwarding reads and writes it."""

    targets: list[str]

    @classmethod
    def of(cls, number: Number) -> Forwarding:
        return cls(targets=number.forward_targets, **cls.stored(number))

    @classmethod
    def from_input(cls, data: dict) -> Forwarding:
        """The settings as ForwardingInput validated them (the API's names)."""
        return cls(targets=data["targets"], **cls.given(data))

    def ring_list(self, *, owner_id) -> RingList:
        """The ring list these settings are: each target an entry, all rung at once."""
        entries = [
            {"member": str(owner_id)} if target == BROWSER else {"phone": target}
            for target in self.targets
        ]
        return RingList(
            entries=entries,
            ring_seconds=self.ring_seconds,
            screening=self.screening,
            caller_id=self.caller_id,
        )


@dataclass(frozen=True)
class RingList(RingSettings):
    """Who a number's calls ring, and how (Number.ring_*, and RingSettings; issue 57):
    `entries` as the API names them ({"phone"}, {"sip"} or {"member"}, each with an optional
    "ringSeconds"); none: the calls go to voicemail."""

    entries: list[dict]
    strategy: str = RingStrategy.ALL

    @classmethod
    def of(cls, number: Number) -> RingList:
        return cls(
            entries=[dict(entry) for entry in number.ring_entries],
            strategy=number.ring_strategy,
            **cls.stored(number),
        )

    @classmethod
    def from_input(cls, data: dict) -> RingList:
        """The list as RingingInput validated it (the API's names)."""
        return cls(entries=list(data["entries"]), strategy=data["strategy"], **cls.given(data))


def dial_target_check(*, owner: User, target: str, field: str = "targets") -> None:
    """Refuse a target Relay may not ring on the owner's behalf (a forwarding target, a
    script's `dial`), with destination_not_allowed naming `field`: a number of Relay's own
    inventory, held or not (the call would come back: a loop), or one the dialing policy
    refuses for this owner (counted for fraud review, like a call)."""
    if target == BROWSER:
        return  # the owner's own tabs: nothing is dialled
    if InventoryNumber.objects.filter(e164=target).exists():
        raise ApplicationError(
            f"{target} is a number of this service; ringing it would loop.",
            code=ErrorCode.DESTINATION_NOT_ALLOWED,
            fields={field: [f"{target} is a number of this service."]},
        )
    try:
        dialing.destination_check(target, extra_countries=owner.extra_dial_countries)
    except dialing.DestinationNotAllowed as refused:
        refusal_record(user=owner, kind=DialRefusal.Kind.DESTINATION, reason=refused.reason)
        raise ApplicationError(
            refused.message, code=refused.code, fields={field: [refused.message]}
        ) from refused


def sip_target_problem(uri: str) -> str | None:
    """Why Relay may not ring the SIP URI `uri` directly, or None: its host is a private or
    loopback address and WEBHOOK_ALLOW_PRIVATE (the one switch for every address Relay
    reaches out to on a user's word: webhooks, voice applications, SIP entries) is off. A
    host that does not resolve yet is no problem here; it is checked again at ring time."""
    host = sip_uri_host(uri)
    return destination_problem(f"sip://{host}", allow_private=settings.WEBHOOK_ALLOW_PRIVATE)


def sip_uri_host(uri: str) -> str:
    """The host (and port) of a SIP URI as SipUriField took it: what follows the scheme and
    any user part, up to its parameters."""
    rest = uri.partition(":")[2]
    return rest.rpartition("@")[2].partition(";")[0]


def number_ringing_set(*, number: Number, user: User, ring_list: RingList) -> RingList:
    """Set who the number's calls ring (`ring_list`, as RingingInput checked its form),
    replacing what was set, for its owner or a manager (`user`, who is rate limited:
    RATE_LIMIT_FORWARDING_PER_USER, counted apart from forwarding). Each entry is checked, and
    a refusal names its index (`entries.N.<kind>`): a phone as forwarding checks it
    (dial_target_check: destination_not_allowed), a SIP URI's host (sip_target_problem), a
    member who is neither the owner nor an active member (invalid_request). Checked and
    stored under the number's lock, so a member removed meanwhile is refused or skipped at
    ring time. Nothing is stored unless every entry passes."""
    ratelimit.hit("ringing:user", str(user.pk), settings.RATE_LIMIT_FORWARDING_PER_USER)
    owner = number.owner
    for index, entry in enumerate(ring_list.entries):
        if "phone" in entry:
            dial_target_check(owner=owner, target=entry["phone"], field=f"entries.{index}.phone")
        elif "sip" in entry and (problem := sip_target_problem(entry["sip"])):
            raise InvalidRequest(
                f"entries.{index}.sip: {problem}.",
                fields={f"entries.{index}.sip": [f"{problem}; Relay rings public addresses."]},
            )
    with transaction.atomic():
        locked = _locked(number)
        people = ring_members(number=locked)
        for index, entry in enumerate(ring_list.entries):
            if "member" in entry and entry["member"] not in people:
                raise InvalidRequest(
                    f"entries.{index}.member: not the owner nor a member of this number.",
                    fields={
                        f"entries.{index}.member": [
                            "Not the owner nor a member of this number (a member who left, "
                            "an invitation not accepted yet, or someone else)."
                        ]
                    },
                )
        return _ring_list_store(number, ring_list)


def ring_members(*, number: Number) -> set[str]:
    """The user ids (as text) a member entry of the number may name: its owner and its
    active members."""
    rows = NumberMember.objects.filter(number=number, status=MemberStatus.ACTIVE)
    return {str(number.owner_id), *(str(pk) for pk in rows.values_list("user_id", flat=True))}


def number_ringing_clear(*, number: Number) -> None:
    """Ring nobody: the calls go to voicemail; the settings go back to their defaults."""
    _ring_list_store(number, RingList(entries=[]))


def number_forwarding_set(*, number: Number, forwarding: Forwarding) -> Forwarding:
    """Forward the number's calls to `forwarding.targets` (1 to FORWARD_TARGETS_MAX distinct
    dialable numbers, as ForwardingInput checks them), replacing the whole ring list (each
    target an entry, rung at once). Rate limited per owner (RATE_LIMIT_FORWARDING_PER_USER);
    each target must pass dial_target_check. Nothing is stored unless every target passes."""
    owner = number.owner
    ratelimit.hit("forwarding:user", str(owner.pk), settings.RATE_LIMIT_FORWARDING_PER_USER)
    for target in forwarding.targets:
        dial_target_check(owner=owner, target=target)
    _ring_list_store(number, forwarding.ring_list(owner_id=number.owner_id))
    return forwarding


def number_forwarding_clear(*, number: Number) -> None:
    """Turn forwarding off: an empty ring list, the other settings back to their defaults."""
    _ring_list_store(number, RingList(entries=[]))


def _ring_list_store(number: Number, ring_list: RingList) -> RingList:
    fields = {
        "ring_entries": [dict(entry) for entry in ring_list.entries],
        "ring_strategy": ring_list.strategy,
        "forward_ring_seconds": ring_list.ring_seconds,
        "forward_screening": ring_list.screening,
        "forward_caller_id": ring_list.caller_id,
    }
    if not Number.objects.filter(pk=number.pk).update(**fields):
        raise NotFound()  # deleted a moment ago
    for name, value in fields.items():
        setattr(number, name, value)
    return ring_list


# What else goes with a deleted number, registered by the apps above that keep it (the call
# ledger: the calls to it, calls.apps): each deletes its rows of the locked number, in the
# deletion's transaction, and gives back the recording files to delete once that commits.
_deletions: list[Callable[[Number], list[str]]] = []


def number_deletion_register(delete: Callable[[Number], list[str]]) -> None:
    """Have `delete(number)` run whenever a number is deleted (once per function)."""
    if delete not in _deletions:
        _deletions.append(delete)


def _delete_with_recordings(locked: Number) -> None:
    """Delete a locked number; its calls go with it (the registered deletions) and their
    voicemail files, and its recorded greeting, once that commits; its inventory entry rests
    NUMBER_QUARANTINE_HOURS."""
    names = [name for delete in _deletions for name in delete(locked)]
    names.append(locked.greeting_recording)  # recordings_delete_on_commit skips ""
    names.append(locked.hold_music)
    names.extend(
        OpeningHours.objects.filter(number=locked).values_list(
            "closed_greeting_recording", flat=True
        )
    )
    locked.delete()
    quarantine = timedelta(hours=settings.NUMBER_QUARANTINE_HOURS)
    InventoryNumber.objects.filter(pk=locked.inventory_id).update(
        free_from=timezone.now() + quarantine
    )
    recordings_delete_on_commit(names)


def number_delete(*, number: Number) -> None:
    """Delete a number; its history and voicemail go with it, and its entry is free again
    once its quarantine (NUMBER_QUARANTINE_HOURS) is over.

    The row is locked first, as history's writer locks it before adding a record and its
    counter: the deletion then takes every record with their counters (CASCADE), and a
    record being written lands before it or not at all."""
    with transaction.atomic():
        _delete_with_recordings(_locked(number))


def number_release(*, number: Number) -> None:
    """Staff action: take a number from its holder and return it to the inventory. Locked
    first, like number_delete; a number already gone is left alone."""
    with transaction.atomic():
        locked = Number.objects.select_for_update().filter(pk=number.pk).first()
        if locked is not None:
            _delete_with_recordings(locked)


# --- blocklist -----------------------------------------------------------------------------
def blocked_caller_add(*, number: Number, caller_num: str) -> tuple[BlockedCaller, bool]:
    """Block a caller on a number. Returns (entry, created); idempotent. At most
    BLOCKLIST_MAX_PER_NUMBER callers (`blocklist_full`), counted under the number's lock.
    `caller_num` is E.164, as CallerNumberField cleans it."""
    caller = caller_num
    with transaction.atomic():
        number = _locked(number)
        existing = BlockedCaller.objects.filter(number=number, caller_num=caller).first()
        if existing is not None:
            return existing, False
        if number.blocked_callers.count() >= BLOCKLIST_MAX_PER_NUMBER:
            raise InvalidRequest(
                f"A number can block at most {BLOCKLIST_MAX_PER_NUMBER} callers.",
                code=ErrorCode.BLOCKLIST_FULL,
            )
        entry = create_unless_taken(BlockedCaller.objects.create, number=number, caller_num=caller)
        if entry is not None:
            return entry, True
        return BlockedCaller.objects.get(number=number, caller_num=caller), False


def blocked_caller_remove(*, number: Number, caller_num: str) -> None:
    """Unblock a caller (E.164); NotFound if the caller is not blocked on that number."""
    deleted, _ = BlockedCaller.objects.filter(number=number, caller_num=caller_num).delete()
    if not deleted:
        raise NotFound()


def numbers_erase(*, user: User) -> None:
    """Account deletion (core.userdata): every number of `user` goes back to the inventory
    exactly as number_delete gives one back (locked first, its history and voicemail with
    it), so a number leaving with its owner waits for whatever a deleted number waits for;
    their memberships of others' numbers end, and the invitations they sent that are still
    pending are withdrawn. Inside the deletion's transaction."""
    for number in Number.objects.select_for_update().filter(owner=user).order_by("pk"):
        _delete_with_recordings(number)
    NumberMember.objects.filter(user=user).delete()
    NumberMember.objects.filter(invited_by=user, status=MemberStatus.INVITED).delete()


# --- opening hours -------------------------------------------------------------------------
def number_hours_set(*, number: Number, data: dict) -> OpeningHours:
    """Set when the number takes calls, replacing what was set: `data` as HoursInput
    validated it (the API's names; the windows checked for overlaps, the dates for
    duplicates). Rate limited per owner like forwarding (RATE_LIMIT_FORWARDING_PER_USER).
    NotFound when the number is gone."""
    ratelimit.hit("hours:user", str(number.owner_id), settings.RATE_LIMIT_FORWARDING_PER_USER)
    fields = {
        "time_zone": data["timeZone"],
        "weekly": [
            {"days": list(w["days"]), "start": w["start"], "end": w["end"]} for w in data["weekly"]
        ],
        "closed_dates": list(data["closedDates"]),
        "do_not_disturb": data["doNotDisturb"],
        "closed_greeting": data["closedGreeting"],
        "updated_at": timezone.now(),
    }
    with transaction.atomic():
        locked = _locked(number)
        hours, _ = OpeningHours.objects.update_or_create(number=locked, defaults=fields)
    return hours


def number_hours_clear(*, number: Number) -> None:
    """Remove the number's hours: it is always open again (do-not-disturb off too), and a
    closed greeting recorded by phone is deleted once this commits. Nothing to remove is no
    error."""
    with transaction.atomic():
        rows = OpeningHours.objects.select_for_update().filter(number=number)
        recorded = list(rows.values_list("closed_greeting_recording", flat=True))
        rows.delete()
        recordings_delete_on_commit(recorded)


# --- members and invitations (issue 57) ----------------------------------------------------
INVITATION_PATH = "/invitations"  # the console's page; the console is served at the root


class MemberExists(InvalidRequest):
    code = ErrorCode.MEMBER_EXISTS
    message = "This address is already a member of the number, or invited to it."


class MemberIsOwner(InvalidRequest):
    code = ErrorCode.MEMBER_IS_OWNER
    message = "This is the number's owner: an owner cannot be a member of their own number."


class InvitationInvalid(ApplicationError):
    code = ErrorCode.INVITATION_INVALID
    message = (
        "This invitation is not valid: it was used, it expired (after "
        f"{INVITATION_DAYS} days) or it was withdrawn. Ask for a new one."
    )


class InvitationEmailMismatch(ApplicationError):
    code = ErrorCode.INVITATION_EMAIL_MISMATCH
    message = (
        "This invitation was sent to another address: sign in with the account of the "
        "address it was sent to."
    )


class MemberRoleRefused(ApplicationError):
    code = ErrorCode.PERMISSION_DENIED
    message = "Only the number's owner and its managers may do this."

    @classmethod
    def unless(cls, allowed: bool) -> None:
        if not allowed:
            raise cls()


@dataclass(frozen=True)
class NumberAccess:
    """A number as one user reaches it: its owner, a manager or a member
    (selectors.number_shared_access)."""

    number: Number
    role: str  # "owner", or a MemberRole
    user: User

    @property
    def manages(self) -> bool:
        """Whether the user may manage the number's members: its owner or a manager."""
        return self.role in ("owner", MemberRole.MANAGER)


def invitation_token_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def invitation_token_split(token: str) -> tuple[uuid.UUID, str] | None:
    """(row id, secret) of an invitation token, `<row id hex>.<secret>`; None if malformed."""
    row_part, _, secret = token.partition(".")
    try:
        return uuid.UUID(hex=row_part), secret
    except ValueError:
        return None


def invitation_pending(*, token: str, lock: bool = False) -> NumberMember | None:
    """The invitation `token` opens now, its number loaded, or None: malformed, unknown,
    used (an accepted invitation forgets its token), expired or withdrawn. The secret's hash
    is compared in constant time; the row is found by the id the token begins with."""
    split = invitation_token_split(token)
    if split is None or not split[1]:
        return None
    row_id, secret = split
    rows = NumberMember.objects.select_related("number", "invited_by")
    if lock:
        rows = rows.select_for_update(of=("self",))
    row = rows.filter(pk=row_id, status=MemberStatus.INVITED).first()
    if row is None or not hmac.compare_digest(invitation_token_hash(secret), row.token_hash):
        return None
    if row.expires_at <= timezone.now():
        return None
    return row


def member_invite(*, access: NumberAccess, email: str, role: str, base_url: str) -> NumberMember:
    """Invite `email` to `access.number` with `role` (MemberRole): a row `invited` and a mail
    with a single-use link to the console's /invitations/<token>, valid INVITATION_DAYS, in
    one transaction. The owner and managers may invite (MemberRoleRefused, 403, for a member).
    Rate limited per inviting user (RATE_LIMIT_INVITATIONS_PER_USER). Under the number's row
    lock, so the limit holds against parallel invitations: MemberIsOwner for the owner's
    address, MemberExists for an address that is a member or invited (an invitation past
    its days is dropped first and no longer counts), `members_full` past
    MEMBERS_MAX_PER_NUMBER; nothing is stored or mailed then. `email` is checked and
    lower-cased here too (InvalidRequest). The token is never logged nor stored: only its
    SHA-256."""
    MemberRoleRefused.unless(access.manages)
    ratelimit.hit("invitations:user", str(access.user.pk), settings.RATE_LIMIT_INVITATIONS_PER_USER)
    address = email_address_checked(email)
    if role not in MemberRole.values:
        raise InvalidRequest("Unknown role.", fields={"role": ["Unknown role."]})
    secret = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        number = Number.objects.select_for_update().select_related("owner")
        number = number.filter(pk=access.number.pk).first()
        if number is None:
            raise NotFound()
        if number.owner_id != access.user.pk:  # a manager still, under the lock
            still = number.members.filter(
                user=access.user, status=MemberStatus.ACTIVE, role=MemberRole.MANAGER
            )
            MemberRoleRefused.unless(still.exists())
        if number.owner.email == address:
            raise MemberIsOwner(fields={"email": [MemberIsOwner.message]})
        number.members.filter(status=MemberStatus.INVITED, expires_at__lte=now).delete()
        taken = number.members.filter(Q(email=address) | Q(user__email=address)).exists()
        if taken:
            raise MemberExists(fields={"email": [MemberExists.message]})
        if number.members.count() >= MEMBERS_MAX_PER_NUMBER:
            raise InvalidRequest(
                f"A number may have at most {MEMBERS_MAX_PER_NUMBER} members and "
                "invitations together; remove one first.",
                code=ErrorCode.MEMBERS_FULL,
            )
        member = NumberMember.objects.create(
            number=number,
            email=address,
            role=role,
            status=MemberStatus.INVITED,
            invited_by=access.user,
            token_hash=invitation_token_hash(secret),
            expires_at=now + timedelta(days=INVITATION_DAYS),
            created_at=now,
        )
        mail_queue(
            to=address,
            template="number_invitation",
            context={
                "to": address,
                "inviter": access.user.email,
                "number": number.number,
                "alias": number.alias,
                "role": role,
                "invitation_url": f"{base_url}{INVITATION_PATH}/{member.pk.hex}.{secret}",
                "valid_days": INVITATION_DAYS,
            },
        )
    logger.info("user %s invited someone to number %s as %s", access.user.pk, number.pk, role)
    return member


def invitations_purge(*, now=None) -> int:
    """Delete the invitations past their days (purge_expired): no link of theirs works any
    more, and the address they name need not be kept. Returns how many."""
    expired = NumberMember.objects.filter(
        status=MemberStatus.INVITED, expires_at__lte=now or timezone.now()
    )
    deleted, _ = expired.delete()
    return deleted


def invitation_accept(*, user: User, token: str) -> NumberMember:
    """`user` accepts the invitation `token`: the row becomes their membership (`active`),
    and the token is forgotten, so the link works once. InvitationInvalid (400) for a token
    that is not valid now (invitation_pending), even when two requests race with it: the row
    is locked and read again. InvitationEmailMismatch (403) unless the account's address is
    the invited one (compared lower-cased: accounts store addresses so); MemberIsOwner for
    the number's owner; MemberExists when the account is a member already (by another
    address it had). Nothing is joined on any refusal."""
    with transaction.atomic():
        row = invitation_pending(token=token, lock=True)
        if row is None:
            raise InvitationInvalid()
        if UserManager.normalize_email_address(user.email) != row.email:
            raise InvitationEmailMismatch()
        if row.number.owner_id == user.pk:
            raise MemberIsOwner()
        now = timezone.now()
        try:
            with transaction.atomic():  # a savepoint: the constraint's refusal keeps the lock
                NumberMember.objects.filter(pk=row.pk).update(
                    status=MemberStatus.ACTIVE,
                    user=user,
                    token_hash="",
                    expires_at=None,
                    joined_at=now,
                )
        except IntegrityError as exc:
            raise MemberExists() from exc
    row.status, row.user, row.token_hash, row.expires_at, row.joined_at = (
        MemberStatus.ACTIVE,
        user,
        "",
        None,
        now,
    )
    logger.info("user %s joined number %s as %s", user.pk, row.number_id, row.role)
    return row


def member_role_set(*, access: NumberAccess, member: NumberMember, role: str) -> NumberMember:
    """Change a member's (or an invitation's) role; the owner and managers only
    (MemberRoleRefused). NotFound when the row is gone."""
    MemberRoleRefused.unless(access.manages)
    if role not in MemberRole.values:
        raise InvalidRequest("Unknown role.", fields={"role": ["Unknown role."]})
    if not NumberMember.objects.filter(pk=member.pk).update(role=role):
        raise NotFound()
    member.role = role
    return member


def membership_notifications_set(
    *,
    user: User,
    number_id,
    webhook: bool | None = None,
    matrix: bool | None = None,
    missed_call_email: bool | None = None,
    voicemail_email: bool | None = None,
) -> NumberMember:
    """Switch what the user hears of a number shared with them besides their sockets (None
    leaves a switch as it is): their webhook, their Matrix room, the mail of a missed call and
    of a voicemail. Their own active membership only: NotFound for a number they own, are not
    an active member of, or that does not exist (never saying which). Nobody else's switches
    can be changed, the owner's and managers' neither."""
    try:
        pk = uuid.UUID(str(number_id))
    except ValueError as exc:
        raise NotFound() from exc
    switches = {
        "notify_webhook": webhook,
        "notify_matrix": matrix,
        "missed_call_email": missed_call_email,
        "voicemail_email": voicemail_email,
    }
    changed = {field: value for field, value in switches.items() if value is not None}
    with transaction.atomic():
        member = (
            NumberMember.objects.select_for_update()
            .select_related("number")
            .filter(number_id=pk, user=user, status=MemberStatus.ACTIVE)
            .first()
        )
        if member is None:
            raise NotFound()
        for field, value in changed.items():
            setattr(member, field, value)
        if changed:
            member.save(update_fields=list(changed))
    return member


def member_remove(*, access: NumberAccess, member: NumberMember) -> None:
    """Remove a member, or withdraw an invitation (its link dies with the row): the owner and
    managers may remove anyone; a member may remove themself (leave). MemberRoleRefused
    otherwise; NotFound when the row is gone. The member's access ends with the commit: every
    read of the number checks the membership again."""
    if not access.manages and member.user_id != access.user.pk:
        raise MemberRoleRefused()
    deleted, _ = NumberMember.objects.filter(pk=member.pk).delete()
    if not deleted:
        raise NotFound()
