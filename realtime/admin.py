from django.contrib import admin, messages

from calls.models import Call, CallEvent
from calls.states import ACTIVE_STATES
from core.admin_links import EstimatedCountPaginator, OwnerLinkMixin
from core.errors import ApplicationError, ErrorCode
from realtime import services


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
    list_display = ("call_id", "owner_link", "to", "caller_id", "status", "duration", "created_at")
    list_filter = ("status",)
    search_fields = ("=call_id", "=to", "owner__email")
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "number", "parent")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    inlines = [CallEventInline]
    readonly_fields = [f.name for f in Call._meta.fields]
    actions = ["cancel_calls"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def lookup_allowed(self, lookup, value, request=None):
        return lookup == "owner" or super().lookup_allowed(lookup, value, request)

    @admin.action(description="Cancel the selected calls that have not ended")
    def cancel_calls(self, request, queryset):
        canceled = 0
        for call in queryset.filter(status__in=ACTIVE_STATES).select_related("owner"):
            try:
                services.call_cancel(call=call)
                canceled += 1
            except ApplicationError as error:
                if error.code != ErrorCode.CALL_NOT_CANCELABLE:
                    raise
                pass  # it ended meanwhile
        self.message_user(request, f"Canceled {canceled} call(s).", messages.SUCCESS)
