from django.contrib import admin

from captcha.models import CaptchaChallenge, CaptchaToken


@admin.register(CaptchaChallenge)
class CaptchaChallengeAdmin(admin.ModelAdmin):
    list_display = ("id", "a", "b", "created_at", "expires_at", "used_at")
    ordering = ("-created_at",)
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(CaptchaToken)
class CaptchaTokenAdmin(CaptchaChallengeAdmin):
    list_display = ("id", "created_at", "expires_at", "used_at")
