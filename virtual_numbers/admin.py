from django.contrib import admin, messages
from django.db.models import Exists, OuterRef

from virtual_numbers import services
from virtual_numbers.models import InventoryNumber, Number


@admin.register(Number)
class NumberAdmin(admin.ModelAdmin):
    list_display = ("number", "alias", "owner", "created_at")
    search_fields = ("number", "alias", "owner__email")
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "inventory")
    fields = ("id", "number", "alias", "owner", "inventory", "created_at")  # never the PIN
    readonly_fields = ("id", "number", "owner", "inventory", "created_at")
    ordering = ("-created_at",)
    actions = ["release"]

    def has_add_permission(self, request):
        return False  # numbers are created through the API, behind the CAPTCHA

    @admin.action(description="Release the selected numbers back to the inventory")
    def release(self, request, queryset):
        count = 0
        for number in queryset:
            services.number_release(number=number)
            count += 1
        self.message_user(request, f"Released {count} number(s).", messages.SUCCESS)


class HeldFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("free", "Free"), ("held", "Held"))

    def queryset(self, request, queryset):
        if self.value() == "free":
            return queryset.filter(held=False)
        if self.value() == "held":
            return queryset.filter(held=True)
        return queryset


@admin.register(InventoryNumber)
class InventoryNumberAdmin(admin.ModelAdmin):
    list_display = ("e164", "is_held", "created_at")
    list_filter = (HeldFilter,)
    search_fields = ("e164",)
    readonly_fields = ("created_at",)

    def get_queryset(self, request):
        held = Number.objects.filter(inventory=OuterRef("pk"))
        return super().get_queryset(request).annotate(held=Exists(held))

    @admin.display(boolean=True, description="held", ordering="held")
    def is_held(self, obj):
        return obj.held
