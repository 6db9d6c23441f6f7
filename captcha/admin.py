from django.contrib import admin

from captcha.models import CaptchaChallenge, CaptchaToken
from core.admin_links import ReadOnlyAdmin


@admin.register(CaptchaChallenge)
class CaptchaChallengeAdmin(ReadOnlyAdmin):
    list_display = ("id", "a", "b", "created_at", "expires_at", "used_at")
    ordering = ("-created_at",)
    show_full_result_count = False


@admin.register(CaptchaToken)
class CaptchaTokenAdmin(CaptchaChallengeAdmin):
    list_display = ("id", "created_at", "expires_at", "used_at")
