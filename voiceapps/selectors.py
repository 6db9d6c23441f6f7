"""The reads of voice applications."""

from core.errors import NotFound
from voiceapps.models import VoiceApp


def voice_app_of(*, number) -> VoiceApp | None:
    """The number's voice application, or None when its calls go to forwarding and voicemail."""
    return VoiceApp.objects.filter(number=number).first()


def voice_app_access(*, number) -> VoiceApp:
    """The number's voice application; NotFound when it has none."""
    app = voice_app_of(number=number)
    if app is None:
        raise NotFound()
    return app
