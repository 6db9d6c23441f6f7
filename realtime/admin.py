from django.contrib import admin, messages

from calls.models import Call, CallEvent, Direction
from calls.states import ACTIVE_STATES
from core.admin_links import EstimatedCountPaginator, OwnerLinkMixin, change_link
from core.errors import ApplicationError, ErrorCode
from history.models import ANONYMOUS_CALLER
from realtime import services
from virtual_numbers import services as number_services


class CallEventInline(admin.TabularInline):
    model = CallEvent
    extra = 0
    max_num = 0
    can_delete = False
    fields = ("status", "at", "detail")
    readonly_fields = fields
    ordering = ("at", "id")


@admin.register(Call)
class CallAdmin(OwnerLinkMixin, admin.ModelAdmin):
    """Every call, outbound and inbound (the call history is `direction` inbound). Staff see
    that a voicemail exists, never the message nor its words: they are the owner's."""

    list_display = (
        "created_at",
        "direction",
        "call_id",
        "owner_link",
        "number_link",
        "caller_id",
        "to",
        "status",
        "outcome",
        "answered_by",
        "duration",
    )
    list_filter = ("direction", "status", "outcome", "answered_by")
    date_hierarchy = "created_at"
    search_fields = ("=call_id", "=to", "=caller_id", "=number__number", "owner__email")
    list_select_related = ("owner", "number")
    raw_id_fields = ("owner", "number", "parent")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    inlines = [CallEventInline]
    readonly_fields = [f.name for f in Call._meta.fields]
    actions = ["cancel_calls", "block_callers"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a record of what happened; its actions go through the services

    def has_delete_permission(self, request, obj=None):
        return False

    def lookup_allowed(self, lookup, value, request=None):
        # Links from a number or user page filter by them, and by caller ("who keeps calling").
        return lookup in {"owner", "number", "caller_id", "direction"} or super().lookup_allowed(
            lookup, value, request
        )

    @admin.display(description="number", ordering="number__number")
    def number_link(self, obj):
        return change_link(obj.number, obj.number.number) if obj.number is not None else "-"

    @admin.action(description="Cancel the selected calls that have not ended")
    def cancel_calls(self, request, queryset):
        canceled = 0
        outbound = queryset.filter(direction=Direction.OUTBOUND, status__in=ACTIVE_STATES)
        for call in outbound.select_related("owner"):
            try:
                services.call_cancel(call=call)
                canceled += 1
            except ApplicationError as error:
                if error.code != ErrorCode.CALL_NOT_CANCELABLE:
                    raise
                pass  # it ended meanwhile
        self.message_user(request, f"Canceled {canceled} call(s).", messages.SUCCESS)

    @admin.action(description="Block the callers of the selected inbound calls on their numbers")
    def block_callers(self, request, queryset):
        added = 0
        inbound = queryset.filter(direction=Direction.INBOUND, number__isnull=False)
        for call in inbound.exclude(caller_id=ANONYMOUS_CALLER).select_related("number"):
            _entry, created = number_services.blocked_caller_add(
                number=call.number, caller_num=call.caller_id
            )
            added += created
        self.message_user(request, f"Blocked {added} new caller(s).", messages.SUCCESS)
