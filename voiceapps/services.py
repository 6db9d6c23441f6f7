"""The writes of voice applications."""

from django.db import transaction
from django.utils import timezone

from core.errors import NotFound
from virtual_numbers.services import dial_target_check
from voiceapps.models import VoiceApp
from voiceapps.verbs import dial_targets


def voice_app_set(*, number, script: list | None = None, url: str = "") -> VoiceApp:
    """Have `script` (checked) or `url` answer the number's incoming calls, replacing what
    answered them before. Every target the script may `dial` must be one Relay may ring on
    the owner's behalf, as a forwarding target must (dial_target_check); nothing is stored
    otherwise."""
    for target in dial_targets(script or []):
        dial_target_check(owner=number.owner, target=target, field="script")
    app, _ = VoiceApp.objects.update_or_create(
        number=number,
        defaults={"script": script, "url": url, "updated_at": timezone.now()},
    )
    return app


def voice_app_delete(*, number) -> None:
    """The number's calls go back to forwarding and voicemail; NotFound when it had no app."""
    with transaction.atomic():
        if not VoiceApp.objects.filter(number=number).delete()[0]:
            raise NotFound()
