from django.apps import AppConfig


class VoiceappsConfig(AppConfig):
    name = "voiceapps"
    default_auto_field = "django.db.models.BigAutoField"
