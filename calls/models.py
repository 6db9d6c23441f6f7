"""The call ledger: a call, its numbered events, its recordings, and the counters behind the
call list's exact total.

One row of `Call` is one call, whoever placed it and however it runs (a message said, a
script run, a browser's audio). Its `status` moves only along calls.states.MOVES, and only
through calls.ledger, which numbers each of the call's events (`CallEvent.seq`) in the same
UPDATE that moves the state: a reader of the events can tell a missed one from a gap.

A call's other parties are its `Leg`s (a forwarding target, a `dial` verb's target, a tab
that took it), each with its own state (calls.states.LEG_MOVES).
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from calls.states import ACTIVE_STATES, TERMINAL_STATES, CallState, LegState


class Direction(models.TextChoices):
    OUTBOUND = "outbound", "Outbound"
    INBOUND = "inbound", "Inbound"


class Outcome(models.TextChoices):
    """How an inbound call ended for its owner (history's `status`): set as it ends."""

    ANSWERED = "answered", "Answered"
    MISSED = "missed", "Missed"
    BLOCKED = "blocked", "Blocked"


class AnsweredBy(models.TextChoices):
    """Who took an answered call: a person on one of the owner's phones (forwarding),
    voicemail, the number's voice application, or one of the owner's browser tabs."""

    PERSON = "person", "A person"
    VOICEMAIL = "voicemail", "Voicemail"
    APP = "app", "Voice app"
    BROWSER = "browser", "Browser"


class MachineDetection(models.TextChoices):
    """What an outbound call asked of the machine detector (telephony.machine_detection):
    report who answered, or also leave its message on a machine after the beep."""

    DETECT = "detect", "Detect"
    LEAVE_MESSAGE = "leave_message", "Leave the message after the beep"


class AnsweredAs(models.TextChoices):
    """What the machine detector heard answer an outbound call (`answeredBy` on the wire)."""

    HUMAN = "human", "A person"
    MACHINE = "machine", "An answering machine"
    FAX = "fax", "A fax"
    UNKNOWN = "unknown", "No telling"


class TranscriptStatus(models.TextChoices):
    """Where a recording's transcript stands (history.tasks): null on one without a message."""

    PENDING = "pending", "Pending"  # stored, waiting for the worker
    DONE = "done", "Done"
    FAILED = "failed", "Failed"  # the engine could not read it; the mail went without
    OFF = "off", "Off"  # TRANSCRIBE_ENGINE=off, or longer than TRANSCRIBE_MAX_SECONDS


# The calls the history shows (history.records.history_calls): ended inbound calls (only an
# inbound call has an outcome: call_outcome_inbound_only) on a number still there.
HISTORY = models.Q(outcome__isnull=False, number__isnull=False)


class Call(models.Model):
    """A call: an outbound one a user asked for (ring `to`, say `message` or run `script`),
    or an inbound one to a user's number (from `caller_id` to `to`, its `number`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    direction = models.CharField(
        max_length=8, choices=Direction.choices, default=Direction.OUTBOUND
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calls"
    )
    # A call started by another call (a script's `dial`, later a transfer); null for most.
    parent = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="children",
        db_index=False,  # call_children: most calls have none, and pay no index for it
    )
    # The client's callId of an outbound call; blank on an inbound one, which has none.
    call_id = models.CharField(max_length=64, blank=True, help_text="the client's callId")
    to = models.CharField(max_length=16)
    message = models.TextField(help_text="the text said; blank for a call that runs a script")
    script = models.JSONField(
        null=True, blank=True, help_text="the verbs the call runs (voiceapps); null: say message"
    )
    language = models.CharField(max_length=32, default="en", help_text="the voice it is spoken in")
    # The held number it calls from, or the number an inbound call rang; kept null if that
    # number is deleted later.
    number = models.ForeignKey(
        "numbers.Number", on_delete=models.SET_NULL, null=True, blank=True, related_name="calls"
    )
    caller_id = models.CharField(
        max_length=16, help_text="the number presented to the callee: the caller of an inbound call"
    )
    # Where this call's call_status events are POSTed as well (signed webhooks), if set.
    status_callback = models.CharField(max_length=2000, blank=True, default="", db_default="")
    # A call from the browser (the `rtc_offer` frame): the tab's WebRTC offer, which the agent
    # that claims the call answers (telephony.webrtc); blank for every other call.
    rtc_offer = models.TextField(blank=True, default="", db_default="")
    status = models.CharField(max_length=16, choices=CallState.choices, default=CallState.QUEUED)
    # The `seq` of the call's newest event (CallEvent): 1 once submitted (its `queued`).
    last_seq = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    dialing_at = models.DateTimeField(null=True, blank=True)
    ringing_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    duration = models.PositiveIntegerField(null=True, blank=True, help_text="seconds")
    # The answered seconds the plan's daily quota granted the call when it was answered
    # (accounts.quotas.talk_grant); the provider hangs up there. Null: no quota applied.
    talk_limit = models.PositiveIntegerField(null=True, blank=True, help_text="seconds")
    failure_reason = models.CharField(max_length=200, blank=True, default="")
    # An inbound call's outcome and who answered it, set as it ends (answered_by as it is
    # answered); null on an outbound call and on one still up.
    outcome = models.CharField(max_length=8, choices=Outcome.choices, null=True, blank=True)  # noqa: DJ001 - null: not ended
    answered_by = models.CharField(max_length=9, choices=AnsweredBy.choices, null=True, blank=True)  # noqa: DJ001 - null: nobody
    # An outbound call's machine detection (issue 56): null when not asked for; what it heard
    # answer, null until it has decided (or when not asked for).
    machine_detection = models.CharField(  # noqa: DJ001 - null: not asked for
        max_length=13, choices=MachineDetection.choices, null=True, blank=True
    )
    answered_as = models.CharField(  # noqa: DJ001 - null: not decided
        max_length=7, choices=AnsweredAs.choices, null=True, blank=True
    )
    # SIP's Call-ID of the call's INVITE (a made-up one from the simulated provider).
    sip_call_id = models.CharField(max_length=255, blank=True, default="")
    # When the next step is due at the latest; a non-terminal call past it (plus grace) has
    # lost its worker and is driven again by the recovery pass.
    step_deadline = models.DateTimeField(null=True, blank=True)
    recoveries = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "call_id"],
                condition=models.Q(direction=Direction.OUTBOUND),
                name="call_unique_call_id",
            ),
            # An inbound call per SIP Call-ID, however often the trunk re-sends its INVITE.
            models.UniqueConstraint(
                fields=["sip_call_id"],
                condition=models.Q(direction=Direction.INBOUND) & ~models.Q(sip_call_id=""),
                name="call_inbound_sip_call_id",
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__isnull=True) | models.Q(outcome__in=Outcome.values),
                name="call_outcome_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(answered_by__isnull=True)
                | models.Q(answered_by__in=AnsweredBy.values),
                name="call_answered_by_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=CallState.values), name="call_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(machine_detection__isnull=True)
                | models.Q(machine_detection__in=MachineDetection.values),
                name="call_machine_detection_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(answered_as__isnull=True)
                | models.Q(answered_as__in=AnsweredAs.values),
                name="call_answered_as_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(direction__in=Direction.values), name="call_direction_valid"
            ),
            # An outcome is an inbound call's (how it ended for its callee): the history reads
            # calls by it alone (HISTORY), without their direction.
            models.CheckConstraint(
                condition=models.Q(outcome__isnull=True) | models.Q(direction=Direction.INBOUND),
                name="call_outcome_inbound_only",
            ),
        ]
        indexes = [
            # The direction is a column, not a partial index's condition: a prepared statement
            # binds it as a parameter, which no planner matches against a condition.
            models.Index(
                fields=["owner", "direction", "-created_at", "-id"], name="call_owner_newest"
            ),
            models.Index(
                fields=["owner", "direction", "status", "-created_at", "-id"],
                name="call_owner_status",
            ),
            # The quotas' counts (calls.selectors): the owner's calls up now, and answered ones.
            models.Index(
                fields=["owner", "direction"],
                condition=models.Q(ended_at__isnull=True),
                name="call_owner_up",
            ),
            models.Index(
                fields=["owner", "direction", "answered_at"],
                condition=models.Q(answered_at__isnull=False),
                name="call_owner_answered",
            ),
            models.Index(
                fields=["step_deadline"],
                condition=models.Q(status__in=sorted(ACTIVE_STATES)),
                name="call_active_deadline",
            ),
            # The history (a read of the inbound calls that ended, on a number still there:
            # history.records.history_calls): the owner's, and the owner's by outcome, each
            # partial on exactly the history's condition, which holds no parameter, so that a
            # prepared statement's generic plan matches it too, and a deep offset is walked in
            # the index alone (every column it reads is in it). Then a number's, a caller's,
            # and everyone's newest first (the admin).
            models.Index(
                fields=["owner", "-created_at", "-id"],
                condition=HISTORY,
                name="history_owner_newest",
            ),
            models.Index(
                fields=["owner", "outcome", "-created_at", "-id"],
                condition=HISTORY,
                name="history_owner_outcome",
            ),
            models.Index(
                fields=["number", "direction", "-created_at", "-id"], name="call_number_newest"
            ),
            models.Index(fields=["caller_id"], name="call_caller"),
            models.Index(fields=["-created_at", "-id"], name="call_newest"),
            models.Index(
                fields=["parent"], condition=models.Q(parent__isnull=False), name="call_children"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.call_id or self.caller_id} -> {self.to} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATES


class LegKind(models.TextChoices):
    SIP = "sip", "SIP"
    BROWSER = "browser", "Browser"


class LegRole(models.TextChoices):
    CALLER = "caller", "Caller"
    CALLEE = "callee", "Callee"
    FORWARD_TARGET = "forward_target", "Forwarding target"
    DIAL_TARGET = "dial_target", "Dial target"
    TRANSFER_TARGET = "transfer_target", "Transfer target"
    CONSULT_TARGET = "consult_target", "Consultation target"


# The roles of legs Relay dials out on the owner's behalf: they count in the plan's quotas.
DIALLED_ROLES = (
    LegRole.FORWARD_TARGET,
    LegRole.DIAL_TARGET,
    LegRole.TRANSFER_TARGET,
    LegRole.CONSULT_TARGET,
)


class Leg(models.Model):
    """One party of a call besides its own: a forwarding target of an inbound call
    (`forward_target`, `dial` 0), a target of the n-th `dial` verb its script ran
    (`dial_target`, `dial` n), the target a bridged party handed the call on to
    (`transfer_target`, issue 58: `dial` one more than the call's legs had), the target a
    tab consults before handing the call on (`consult_target`, an attended transfer from the
    browser phone: `dial` as a transfer's; it becomes the `transfer_target` once the tab
    completes the transfer), or a tab of the owner that took it (`kind` browser).

    Its target is typed: a `phone` (E.164) or a `sip_uri` for a SIP leg, the `user` whose
    browser for a browser one (and, on a SIP leg a ring list's member entry rang, the member
    whose phone it is; `ring_entry` the entry's index). A SIP leg is written before its
    INVITE exists, and is unique per call, dial and phone (or SIP URI): a target is dialled
    at most once per dial of a call, whatever crashes. Relay dials SIP legs on the owner's
    behalf, so the owner's plan quotas count them beside their outbound calls
    (calls.selectors.dialled_uses). Its `status` moves along calls.states.LEG_MOVES only
    (calls.legs)."""

    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="legs", db_index=False)
    # The call's owner, copied: the quotas count "this owner's legs" by one index range.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    kind = models.CharField(max_length=8, choices=LegKind.choices)
    role = models.CharField(max_length=16, choices=LegRole.choices)
    dial = models.PositiveSmallIntegerField(default=0)
    phone = models.CharField(max_length=16, blank=True, default="")
    sip_uri = models.CharField(max_length=255, blank=True, default="")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
        help_text="whose browser took the call, or whose ring list entry rang this phone",
    )
    # The index of the ring list's entry that rang this leg (issue 57), as the list was then;
    # null for a script's dial and for legs of the release before.
    ring_entry = models.PositiveSmallIntegerField(null=True, blank=True)
    sip_call_id = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=8, choices=LegState.choices, default=LegState.RINGING)
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)  # bridged to the call
    ended_at = models.DateTimeField(null=True, blank=True)
    duration = models.PositiveIntegerField(null=True, blank=True, help_text="seconds bridged")
    talk_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="seconds granted at the bridge"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["call", "dial", "phone"],
                condition=~models.Q(phone=""),
                name="leg_once_per_dial",
            ),
            # A SIP URI too is dialled at most once per dial of a call (a ring list's entry).
            models.UniqueConstraint(
                fields=["call", "dial", "sip_uri"],
                condition=~models.Q(sip_uri=""),
                name="leg_sip_uri_once_per_dial",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=LegState.values), name="leg_status_valid"
            ),
            models.CheckConstraint(
                # a SIP leg's user: the member whose entry rang their phone (issue 57)
                condition=(
                    models.Q(kind=LegKind.SIP) & (~models.Q(phone="") | ~models.Q(sip_uri=""))
                )
                | models.Q(kind=LegKind.BROWSER, user__isnull=False, phone="", sip_uri=""),
                name="leg_target_of_its_kind",
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "created_at"], name="leg_owner_created"),
            # A call's legs still up (settled when the call ends), and every leg by its call.
            models.Index(fields=["call", "status"], name="leg_call_status"),
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.target} of {self.call_id}"

    @property
    def target(self) -> str:
        """The target as people read it: the phone, the SIP URI, or "browser"."""
        return self.phone or self.sip_uri or self.kind


class CallEvent(models.Model):
    """One event of a call, numbered: a state it moved to, or what a verb of its script
    reported (`kind`: `gathered`, `recorded`, `dialed`, `hook_failed`, `limit`, with its result
    in `data`; blank for a state change) at the state it was in. `seq` is 1 for the call's
    first event and one more for each next, with no gap (calls.ledger)."""

    # No index of its own: the unique key (call, seq) below starts with it.
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=CallState.choices)
    at = models.DateTimeField(default=timezone.now)
    detail = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16, blank=True, default="", db_default="")
    data = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["call", "seq"]
        constraints = [
            # A call's events in order, and its index.
            models.UniqueConstraint(fields=["call", "seq"], name="callevent_call_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.call_id} #{self.seq}: {self.kind or self.status}"


class RecordingKind(models.TextChoices):
    RECORD = "record", "A record verb's"
    VOICEMAIL = "voicemail", "Voicemail"
    CALL = "call", "A bridged call's"  # issue 58: both parties, a channel each


class Recording(models.Model):
    """A call's audio, a WAV in the recordings storage (core.recordings): what a `record` verb
    of its script recorded (voiceapps; `GET /api/calls/:callId/recordings/:id`), or the
    voicemail left on an inbound call (at most one a call; `GET /api/history/:id/recording`),
    with its transcript (history.tasks). Downloadable by the call's owner only.

    A voicemail deleted by its owner, or purged after VOICEMAIL_RETENTION_DAYS, keeps its row
    without a file (`name` empty) or a transcript: whether it was heard stays.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="recordings")
    kind = models.CharField(
        max_length=9, choices=RecordingKind.choices, default=RecordingKind.RECORD
    )
    name = models.CharField(
        max_length=200, blank=True, help_text="the file's name in the recordings storage"
    )
    seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    heard = models.BooleanField(
        default=False, db_default=False, help_text="played to the owner in the mailbox"
    )
    # The automatic transcript (a rough draft: history.transcription), made by the worker
    # after the recording commits; deleted with the file.
    transcript = models.TextField(blank=True, default="", db_default="")
    transcript_confidence = models.FloatField(null=True, blank=True, help_text="0 to 1")
    transcript_status = models.CharField(  # noqa: DJ001 - null is the API's "no message"
        max_length=7, choices=TranscriptStatus.choices, null=True, blank=True
    )
    # The worker's hold on a transcription under way, and how many were started: a worker
    # that died mid-way leaves the lease to expire, and the sweep queues it again.
    transcribe_lease_until = models.DateTimeField(null=True, blank=True)
    transcribe_attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    # A bridged call's recording (kind `call`) cut short: the disk filled up as it was written,
    # or its agent stopped mid-bridge (true from its first moment until the bridge ends).
    incomplete = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["call"],
                condition=models.Q(kind=RecordingKind.VOICEMAIL),
                name="recording_one_voicemail",
            ),
            models.CheckConstraint(
                condition=models.Q(transcript_status__isnull=True)
                | models.Q(transcript_status__in=TranscriptStatus.values),
                name="recording_transcript_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(transcript_confidence__isnull=True)
                | models.Q(transcript_confidence__gte=0, transcript_confidence__lte=1),
                name="recording_transcript_confidence_0_1",
            ),
        ]
        indexes = [
            # the retention purge: voicemail that still has its file, oldest first
            models.Index(
                fields=["created_at"],
                condition=models.Q(kind=RecordingKind.VOICEMAIL) & ~models.Q(name=""),
                name="recording_voicemail_age",
            ),
            # the retention purge of bridged calls' recordings (CALL_RECORDING_RETENTION_DAYS)
            models.Index(
                fields=["created_at"],
                condition=models.Q(kind=RecordingKind.CALL),
                name="recording_call_age",
            ),
            # the transcription sweep: messages still waiting for their transcript
            models.Index(
                fields=["transcribe_lease_until"],
                condition=models.Q(transcript_status=TranscriptStatus.PENDING),
                name="recording_transcript_pending",
            ),
            # the orphans' purge: is a file named by any recording?
            models.Index(fields=["name"], name="recording_name"),
        ]

    def __str__(self) -> str:
        return f"recording {self.pk} of {self.call_id}"


class OutcomeCounter(models.Model):
    """How many inbound calls an owner has on one number with one outcome: `total` of the
    history list is a sum of at most 15 of these rows (5 numbers x 3 outcomes), never a COUNT.

    Kept exact in the transaction that ends each inbound call (history.services); deleting a
    number or a user deletes its counters (both CASCADE) with its calls. `manage.py
    recount_totals` corrects any drift. No check that `count` >= 0: a counter that drifted
    must not make a call fail to be recorded; the recount finds it.
    """

    # No index of its own: the unique key below starts with the owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    number = models.ForeignKey("numbers.Number", on_delete=models.CASCADE, related_name="+")
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # The upsert's conflict target, and the index of "this owner's counters".
            models.UniqueConstraint(
                fields=["owner", "number", "outcome"], name="outcomecounter_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.number_id} {self.outcome}: {self.count}"


class CallCounter(models.Model):
    """How many Calls an owner has in one status: `total` of the call list is a sum of at most
    9 of these rows, never a COUNT.

    Kept exact in the call's own transactions: submit adds one `queued`, every state change
    (realtime.pipeline.call_transition) moves one from the old status to the new. Deleting a
    user deletes its counters with its calls (CASCADE). `manage.py recount_totals` corrects
    any drift. No check that `count` >= 0: a counter that drifted must not stop a call; the
    recount finds it.
    """

    # No index of its own: the unique key below starts with the owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    status = models.CharField(max_length=16, choices=CallState.choices)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # The upsert's conflict target, and the index of "this owner's counters".
            models.UniqueConstraint(fields=["owner", "status"], name="callcounter_key"),
        ]

    def __str__(self) -> str:
        return f"{self.owner_id} {self.status}: {self.count}"
