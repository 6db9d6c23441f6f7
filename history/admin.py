from django.contrib import admin, messages

from core.admin_links import EstimatedCountPaginator, OwnerLinkMixin, change_link
from history.models import ANONYMOUS_CALLER, CallRecord
from virtual_numbers import services as number_services


@admin.register(CallRecord)
class CallRecordAdmin(OwnerLinkMixin, admin.ModelAdmin):
    list_display = (
        "created_at",
        "caller_num",
        "number_link",
        "owner_link",
        "status",
        "answered_by",
        "forwarded_to",
        "duration",
        "recording_seconds",
        "heard",
        "transcript_status",
    )
    list_filter = ("status", "answered_by", "heard", "transcript_status")
    # Staff see that a message exists, how long it is and whether it was transcribed, never
    # the message nor its words: they are the owner's, fetched with their credentials.
    exclude = ("recording", "transcript", "transcribe_lease_until")
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

    @admin.action(description="Block the callers of the selected calls on their numbers")
    def block_callers(self, request, queryset):
        added = 0
        for record in queryset.exclude(caller_num=ANONYMOUS_CALLER).select_related(
            "number", "owner"
        ):
            _entry, created = number_services.blocked_caller_add(
                number=record.number, caller_num=record.caller_num
            )
            added += created
        self.message_user(request, f"Blocked {added} new caller(s).", messages.SUCCESS)
