from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connection
from django.utils.functional import cached_property

from history.models import BlockedCaller, CallRecord


class EstimatedCountPaginator(Paginator):
    """An exact COUNT over a million rows on every page load is the slowest part of a
    changelist. Unfiltered, ask PostgreSQL's statistics instead; filtered, count for real."""

    @cached_property
    def count(self):
        query = self.object_list.query
        if connection.vendor == "postgresql" and not query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                    [self.object_list.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] > 10_000:
                return int(row[0])
        return super().count


@admin.register(CallRecord)
class CallRecordAdmin(admin.ModelAdmin):
    list_display = ("created_at", "caller_num", "number", "owner", "status", "duration")
    list_filter = ("status",)
    date_hierarchy = "created_at"
    search_fields = ("=caller_num", "=number__number", "owner__email")
    list_select_related = ("number", "owner")
    raw_id_fields = ("number", "owner")
    ordering = ("-created_at", "-id")
    paginator = EstimatedCountPaginator
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a record of what happened

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(BlockedCaller)
class BlockedCallerAdmin(admin.ModelAdmin):
    list_display = ("caller_num", "number", "created_at")
    search_fields = ("=caller_num", "=number__number", "number__owner__email")
    list_select_related = ("number",)
    raw_id_fields = ("number",)
