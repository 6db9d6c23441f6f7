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
