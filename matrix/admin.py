from django.contrib import admin

from core.admin_links import OutboxAdmin, ReadOnlyAdmin
from matrix import services
from matrix.models import MatrixBotState, MatrixMessage, MatrixRoom


@admin.register(MatrixRoom)
class MatrixRoomAdmin(ReadOnlyAdmin):
    list_display = ("user", "matrix_id", "status", "room_id", "created_at", "ended_at")
    list_filter = ("status",)
    search_fields = ("user__email", "=matrix_id", "=room_id")
    ordering = ("-created_at",)


@admin.register(MatrixMessage)
class MatrixMessageAdmin(OutboxAdmin):
    # The outbox: what the bot sent, holds or gave up, and why.
    list_display = (
        "created_at",
        "kind",
        "room",
        "status",
        "attempts",
        "last_error",
        "next_attempt_at",
    )
    list_filter = ("status", "kind")
    search_fields = ("=key", "room__user__email", "=room__matrix_id")

    def retry_row(self, row):
        services.message_retry(row=row)


@admin.register(MatrixBotState)
class MatrixBotStateAdmin(ReadOnlyAdmin):
    list_display = ("id", "token_refused_at", "sync_holder", "sync_lease_until", "updated_at")
