import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class InventoryNumber(models.Model):
    """A provisioned E.164 number the service can hand out. Free while no Number holds it."""

    e164 = models.CharField(max_length=16, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["e164"]

    def __str__(self) -> str:
        return self.e164


class Number(models.Model):
    """A virtual number held by a user: an inventory entry plus alias and a hashed PIN."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="numbers"
    )
    # One holder per inventory entry: the unique one-to-one is what makes a double
    # allocation impossible, whatever the races.
    inventory = models.OneToOneField(
        InventoryNumber, on_delete=models.PROTECT, related_name="holding"
    )
    number = models.CharField(max_length=16, unique=True)  # copy of inventory.e164 for joins
    alias = models.CharField(max_length=64)
    pin_hash = models.CharField(max_length=255)
    # What voicemail says to callers; empty: the service's default, which never reads the
    # alias out (an alias is the owner's private label).
    greeting = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"], name="number_owner_oldest")]

    def __str__(self) -> str:
        return f"{self.number} ({self.alias})"


class PinFailure(models.Model):
    """A wrong currentPin: counted per number over a sliding window to lock PIN changes."""

    number = models.ForeignKey(Number, on_delete=models.CASCADE, related_name="pin_failures")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["number", "-created_at"], name="pinfailure_number_newest")]

    def __str__(self) -> str:
        return f"wrong PIN for {self.number_id} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class BlockedCaller(models.Model):
    """A caller blocked on one number: their calls are recorded as blocked, duration 0."""

    number = models.ForeignKey(Number, on_delete=models.CASCADE, related_name="blocked_callers")
    caller_num = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["number", "caller_num"], name="blockedcaller_unique_per_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.caller_num} blocked on {self.number_id}"
