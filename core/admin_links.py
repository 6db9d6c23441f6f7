"""Admin building blocks: links between pages, so staff can follow a row to its relatives
both ways, and a paginator that never counts a huge table."""

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import connection
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.http import urlencode


def change_link(obj, label=None) -> str:
    if obj is None:
        return "-"
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


def changelist_link(model, label: str, **filters) -> str:
    meta = model._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), label)


class OwnerLinkMixin:
    """A list column linking each row to the user who owns it (rows with an `owner`)."""

    @admin.display(description="owner", ordering="owner__email")
    def owner_link(self, obj):
        return change_link(obj.owner)


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


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows that only the product writes: staff read them (and may delete them), never add
    or change one."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class OutboxAdmin(ReadOnlyAdmin):
    """An outbox in admin (core.outbox): its rows read-only, newest first, never counted
    whole, and a `retry` action that sends the selected rows again now through the app's
    own service, `retry_row(row)`."""

    ordering = ("-created_at",)
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    actions = ["retry"]

    def retry_row(self, row) -> None:
        raise NotImplementedError

    @admin.action(description="Send the selected rows again now")
    def retry(self, request, queryset):
        for row in queryset:
            self.retry_row(row)
        self.message_user(request, f"Queued {queryset.count()} row(s) again.", messages.SUCCESS)
