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
    """One forwarding target dialled for one inbound call (docs/telephony.md, "Forwarding").

    Written before its INVITE exists, and unique per call and target: a target is dialled at
    most once per call, whatever crashes. Forwarding dials on the owner's behalf, so the
    owner's plan quotas count these legs beside their calls (accounts.quotas reads them
    through `user.forward_legs`, in the same shape: created_at, answered_at, ended_at,
    duration, talk_limit). A leg with no `ended_at` is up; recording its call ends it.
    """

    call = models.ForeignKey(InboundCall, on_delete=models.CASCADE, related_name="legs")
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
            models.UniqueConstraint(fields=["call", "target"], name="forwardleg_once_per_call")
        ]
        indexes = [models.Index(fields=["user", "created_at"], name="forwardleg_user_created")]

    def __str__(self) -> str:
        return f"{self.target} for {self.call_id}"
