from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import connection
from django.utils.functional import cached_property

from history import services
from history.models import BlockedCaller, CallRecord
from relay.admin_links import change_link


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
    list_display = ("created_at", "caller_num", "number_link", "owner_link", "status", "duration")
    list_filter = ("status",)
    date_hierarchy = "created_at"
    search_fields = ("=caller_num", "=number__number", "owner__email")
    list_select_related = ("number", "owner")
    raw_id_fields = ("number", "owner")
    ordering = ("-created_at", "-id")
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    actions = ["block_callers"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a record of what happened

    def has_delete_permission(self, request, obj=None):
        return False

    def lookup_allowed(self, lookup, value, request=None):
        # Links from a number or user page filter by them, and by caller ("who keeps calling").
        return lookup in {"number", "owner", "caller_num"} or super().lookup_allowed(
            lookup, value, request
        )

    @admin.display(description="number", ordering="number__number")
    def number_link(self, obj):
        return change_link(obj.number, obj.number.number)

    @admin.display(description="owner", ordering="owner__email")
    def owner_link(self, obj):
        return change_link(obj.owner)

    @admin.action(description="Block the callers of the selected calls on their numbers")
    def block_callers(self, request, queryset):
        added = 0
        for record in queryset.select_related("number", "owner"):
            _entry, created = services.blocked_caller_add(
                user=record.owner, number_id=record.number_id, caller_num=record.caller_num
            )
            added += created
        self.message_user(request, f"Blocked {added} new caller(s).", messages.SUCCESS)


@admin.register(BlockedCaller)
class BlockedCallerAdmin(admin.ModelAdmin):
    list_display = ("caller_num", "number_link", "created_at")
    search_fields = ("=caller_num", "=number__number", "number__owner__email")
    list_select_related = ("number",)
    raw_id_fields = ("number",)

    def has_add_permission(self, request):
        return False  # block from the call history (action), so the caller is checked

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="number", ordering="number__number")
    def number_link(self, obj):
        return change_link(obj.number, obj.number.number)
