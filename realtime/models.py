import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

# A call's states are the ledger's (calls.states); named here too for the apps that read them
# with realtime's models.
from calls.states import ACTIVE_STATES as ACTIVE_STATES
from calls.states import TERMINAL_STATES as TERMINAL_STATES
from calls.states import CallState as CallState

CALL_STATE_VALUES = CallState.values  # the schema's CallStateEnum (ENUM_NAME_OVERRIDES)


class CallRequest(models.Model):
    """An outbound call a user asked for: ring `to`, say `message`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="call_requests"
    )
    call_id = models.CharField(max_length=64, help_text="the client's callId")
    to = models.CharField(max_length=16)
    message = models.TextField(help_text="the text said; blank for a call that runs a script")
    script = models.JSONField(
        null=True, blank=True, help_text="the verbs the call runs (voiceapps); null: say message"
    )
    language = models.CharField(max_length=32, default="en", help_text="the voice it is spoken in")
    # The held number it calls from; kept null if that number is deleted later.
    from_number = models.ForeignKey(
        "numbers.Number",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="outbound_calls",
    )
    caller_id = models.CharField(max_length=16, help_text="the number presented to the callee")
    # Where this call's call_status events are POSTed as well (signed webhooks), if set.
    status_callback = models.CharField(max_length=2000, blank=True, default="", db_default="")
    # A call from the browser (the `rtc_offer` frame): the tab's WebRTC offer, which the agent
    # that claims the call answers (telephony.webrtc); blank for every other call.
    rtc_offer = models.TextField(blank=True, default="", db_default="")
    status = models.CharField(max_length=16, choices=CallState.choices, default=CallState.QUEUED)
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
    provider_call_id = models.CharField(max_length=100, blank=True, default="")
    # When the next step is due at the latest; a non-terminal call past it (plus grace) has
    # lost its worker and is driven again by the recovery pass.
    step_deadline = models.DateTimeField(null=True, blank=True)
    recoveries = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "call_id"], name="callrequest_unique_call_id"),
            models.CheckConstraint(
                condition=models.Q(status__in=CallState.values), name="callrequest_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "-created_at", "-id"], name="callrequest_owner_newest"),
            models.Index(
                fields=["owner", "status", "-created_at", "-id"], name="callrequest_owner_status"
            ),
            # The quotas' counts (accounts.quotas): the owner's calls up now, and answered ones.
            models.Index(
                fields=["owner"],
                condition=models.Q(ended_at__isnull=True),
                name="callrequest_owner_up",
            ),
            models.Index(
                fields=["owner", "answered_at"],
                condition=models.Q(answered_at__isnull=False),
                name="callrequest_owner_answered",
            ),
            models.Index(
                fields=["step_deadline"],
                condition=models.Q(status__in=sorted(ACTIVE_STATES)),
                name="callrequest_active_deadline",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.call_id} -> {self.to} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATES


class CallEvent(models.Model):
    """One state a call went through, in order: its read-only timeline."""

    call = models.ForeignKey(CallRequest, on_delete=models.CASCADE, related_name="events")
    status = models.CharField(max_length=16, choices=CallState.choices)
    at = models.DateTimeField(default=timezone.now)
    detail = models.CharField(max_length=200, blank=True, default="")
    # What a verb of the call's script reported (voiceapps.program): `gathered`, `recorded`,
    # `dialed`, `hook_failed`, `limit`, with its result in `data`; blank for a state change.
    event = models.CharField(max_length=16, blank=True, default="", db_default="")
    data = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["call", "at"], name="callevent_call_at")]

    def __str__(self) -> str:
        return f"{self.call_id}: {self.status}"


class CallRequestCounter(models.Model):
    """How many CallRequests an owner has in one status: `total` of the call list is a sum
    of at most 9 of these rows, never a COUNT.

    Kept exact in the call's own transactions: submit adds one `queued`, every state change
    (pipeline.call_transition) moves one from the old status to the new. Deleting a user
    deletes its counters with its calls (CASCADE). `manage.py recount_totals` corrects any
    drift. No check that `count` >= 0: a counter that drifted must not stop a call; the
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
            models.UniqueConstraint(fields=["owner", "status"], name="callrequestcounter_key"),
        ]

    def __str__(self) -> str:
        return f"{self.owner_id} {self.status}: {self.count}"


class CallRecording(models.Model):
    """What a `record` verb of the call's script recorded (voiceapps): a WAV in the recordings
    storage (core.recordings), downloadable by the call's owner only
    (`GET /api/calls/:callId/recordings/:id`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    call = models.ForeignKey(CallRequest, on_delete=models.CASCADE, related_name="recordings")
    name = models.CharField(max_length=200, help_text="the file's name in the recordings storage")
    seconds = models.FloatField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"recording {self.pk} of {self.call_id}"
