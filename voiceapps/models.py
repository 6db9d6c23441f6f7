from django.db import models
from django.utils import timezone


class VoiceApp(models.Model):
    """A number's voice application: what answers its incoming calls. Either `script` (a
    static flow, checked by voiceapps.verbs) or `url` (each call POSTs there, and runs the
    script its answer holds); never both."""

    number = models.OneToOneField(
        "numbers.Number", on_delete=models.CASCADE, primary_key=True, related_name="voice_app"
    )
    script = models.JSONField(null=True, blank=True)
    url = models.CharField(max_length=2000, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(script__isnull=True) & ~models.Q(url=""))
                | (models.Q(script__isnull=False) & models.Q(url="")),
                name="voiceapp_script_or_url",
            )
        ]

    def __str__(self) -> str:
        return f"voice app of {self.number_id}"
