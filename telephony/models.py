from django.conf import settings
from django.db import models
from django.utils import timezone


class InboundCall(models.Model):
    """An inbound SIP call while a telephony agent holds it: the ledger that makes every call
    end in exactly one history record.

    Written when the agent starts ringing, before the owner hears of the call; the agent's
    heartbeat keeps `deadline` ahead while it holds the call. The call's CallRecord is
    written in the same transaction that sets `recorded`. A row whose deadline passed
    unrecorded lost its agent: any agent's recovery pass records it (`missed`, or `answered`
    up to the last heartbeat) and sets `recorded`, so a crash never loses a call and a
    re-sent INVITE (same Call-ID) never makes a second one.
    """

    sip_call_id = models.CharField(max_length=255, unique=True)
    number = models.ForeignKey("numbers.Number", on_delete=models.CASCADE, related_name="+")
    caller_num = models.CharField(max_length=16)
    started_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)
    # The forwarding target bridged to the caller (answered then, not by voicemail).
    forwarded_to = models.CharField(max_length=16, blank=True)
    # Answered by the number's voice application: recovery records it so, not as voicemail.
    answered_by_app = models.BooleanField(default=False, db_default=False)
    deadline = models.DateTimeField()
    recorded = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(
                fields=["deadline"],
                condition=models.Q(recorded=False),
                name="inboundcall_unrecorded",
            )
        ]

    def __str__(self) -> str:
        return f"{self.caller_num} -> {self.number_id} ({self.sip_call_id})"


class ForwardLeg(models.Model):
    """One target dialled on a call's behalf: a forwarding target of an inbound call
    (docs/telephony.md, "Forwarding"), or a target of a script's `dial` verb, on an inbound
    call (`call`) or an outbound one (`request`); `dial` is 0 for forwarding, n for the n-th
    `dial` the call's script ran.

    Written before its INVITE exists, and unique per call, dial and target: a target is
    dialled at most once per dial of a call, whatever crashes (a call whose agent died is
    never resumed). Relay dials these on the owner's behalf, so the owner's plan quotas count
    them beside their calls (accounts.quotas reads them through `user.forward_legs`, in the
    same shape: created_at, answered_at, ended_at, duration, talk_limit). A leg with no
    `ended_at` is up; recording its call ends it (an outbound call's: dial_legs_settle).
    """

    call = models.ForeignKey(
        InboundCall, on_delete=models.CASCADE, related_name="legs", null=True, blank=True
    )
    request = models.ForeignKey(
        "calls.Call",
        on_delete=models.CASCADE,
        related_name="+",
        null=True,
        blank=True,
    )
    dial = models.PositiveSmallIntegerField(default=0)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="forward_legs"
    )
    target = models.CharField(max_length=16)
    sip_call_id = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)  # bridged to the caller
    ended_at = models.DateTimeField(null=True, blank=True)
    duration = models.PositiveIntegerField(null=True, blank=True)  # seconds bridged
    talk_limit = models.PositiveIntegerField(null=True, blank=True)  # granted at the bridge

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["call", "dial", "target"],
                condition=models.Q(call__isnull=False),
                name="forwardleg_once_per_call",
            ),
            models.UniqueConstraint(
                fields=["request", "dial", "target"],
                condition=models.Q(request__isnull=False),
                name="dialleg_once_per_request",
            ),
            models.CheckConstraint(
                condition=models.Q(call__isnull=True) ^ models.Q(request__isnull=True),
                name="forwardleg_of_one_call",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "created_at"], name="forwardleg_user_created"),
            models.Index(
                fields=["request"],
                condition=models.Q(ended_at__isnull=True, request__isnull=False),
                name="dialleg_up_by_request",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target} for {self.call_id or self.request_id}"
