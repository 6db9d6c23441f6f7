import uuid

from django.db import models


class CaptchaChallenge(models.Model):
    """An issued addition question. Any answer spends it; it lives 5 minutes."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    a = models.PositiveSmallIntegerField()
    b = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # verify without challengeId: the oldest open challenge with this pair
            models.Index(
                fields=["a", "b", "created_at"],
                condition=models.Q(used_at__isnull=True),
                name="captcha_open_by_pair",
            ),
            models.Index(fields=["expires_at"], name="captcha_challenge_expiry"),
        ]

    def __str__(self) -> str:
        return self.question

    @property
    def question(self) -> str:
        return f"{self.a} + {self.b} = ?"


class CaptchaToken(models.Model):
    """Proof of a right answer: single use, valid 10 minutes, spent by number creation."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="captcha_token_expiry")]

    def __str__(self) -> str:
        return f"captcha token {self.id}"
