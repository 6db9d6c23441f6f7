from django.contrib import admin, messages
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from core.admin_links import OwnerLinkMixin, change_link, changelist_link
from virtual_numbers import selectors, services
from virtual_numbers.models import BlockedCaller, InventoryNumber, Number, NumberMember

TOP_CALLERS = 10


def ring_entry_shown(entry: dict, default_seconds: int) -> str:
    """An entry of a ring list as staff read it: what it rings, and for how long."""
    seconds = entry.get("ringSeconds", default_seconds)
    if "member" in entry:
        return f"member {entry['member']} (their tabs and profile phone), {seconds} s"
    return f"{entry.get('phone') or entry.get('sip')}, {seconds} s"


class BlockedCallerInline(admin.TabularInline):
    model = BlockedCaller
    extra = 0
    max_num = 0
    fields = ("caller_num", "created_at")
    readonly_fields = fields
    can_delete = True  # deleting a row unblocks that caller


class NumberMemberInline(admin.TabularInline):
    """Whom the number is shared with (issue 57): members and invitations, read only; never
    an invitation's token hash. Staff may delete a row (remove a member, withdraw an
    invitation), as the owner can."""

    model = NumberMember
    fk_name = "number"
    extra = 0
    max_num = 0
    fields = (
        "email",
        "role",
        "status",
        "user",
        "invited_by",
        "created_at",
        "expires_at",
        "joined_at",
    )
    readonly_fields = fields
    can_delete = True
    verbose_name = "member or invitation"
    verbose_name_plural = "members and invitations"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user", "invited_by")


@admin.register(Number)
class NumberAdmin(OwnerLinkMixin, admin.ModelAdmin):
    list_display = ("number", "alias", "owner_link", "created_at")
    search_fields = ("=number", "alias", "owner__email")
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "inventory")
    # never the PIN (pin_hash is not a field here, not even read-only)
    fields = (
        "id",
        "number",
        "alias",
        "owner",
        "inventory",
        "created_at",
        "forwarding",
        "ringing",
        "hours_shown",
        "hold_music_shown",
        "history",
        "top_callers",
    )
    readonly_fields = tuple(name for name in fields if name != "alias")  # alias: editable
    ordering = ("-created_at",)
    inlines = [NumberMemberInline, BlockedCallerInline]
    actions = ["release", "forwarding_off"]

    @admin.display(description="forwarding")
    def forwarding(self, obj):
        # Set by the owner (PUT /api/numbers/:id/forwarding); staff may only turn it off.
        if not obj.forward_targets:
            return "Off: calls go to voicemail."
        screening = ", screened" if obj.forward_screening else ""
        return (
            f"To {', '.join(obj.forward_targets)}, ringing {obj.forward_ring_seconds} s"
            f"{screening}, showing {obj.get_forward_caller_id_display()}."
        )

    @admin.display(description="ring list")
    def ringing(self, obj):
        # Set by the owner or a manager (PUT /api/numbers/:id/ringing): shown, never
        # changed, here (the forwarding action empties it).
        if not obj.ring_entries:
            return "Nobody: calls go to voicemail."
        items = format_html_join(
            "",
            "<li>{}</li>",
            ((ring_entry_shown(entry, obj.forward_ring_seconds),) for entry in obj.ring_entries),
        )
        return format_html(
            "<p>{}{}.</p><ol>{}</ol>",
            obj.get_ring_strategy_display().capitalize(),
            ", screened" if obj.forward_screening else "",
            items,
        )

    @admin.display(description="opening hours")
    def hours_shown(self, obj):
        # Set by the owner (PUT /api/numbers/:id/hours): shown, never changed, here.
        row = selectors.hours_of(number=obj)
        if row is None:
            return "None: always open."
        current = selectors.HoursSettings.of(row, at=timezone.now())
        windows = format_html_join(
            "",
            "<li>{} {}-{}</li>",
            ((" ".join(w["days"]), w["start"], w["end"]) for w in row.weekly),
        )
        return format_html(
            "<p>{} Times in {}; {} now.</p><ul>{}</ul>"
            "<p>Closed dates: {}.</p><p>Closed greeting: {}{}</p>",
            "Do not disturb is on." if row.do_not_disturb else "",
            row.time_zone,
            "open" if current.open_now else "closed",
            windows or format_html("<li>{}</li>", "every day, all day"),
            ", ".join(row.closed_dates) or "none",
            row.closed_greeting or "(the usual greeting)",
            (
                f" (a recording by phone, {row.closed_greeting_recording_seconds:.1f} s, is "
                "played in its place)"
                if row.closed_greeting_recording
                else ""
            ),
        )

    @admin.display(description="music on hold")
    def hold_music_shown(self, obj):
        # Uploaded by the owner (PUT /api/numbers/:id/hold-music): shown, never changed, here.
        if not obj.hold_music:
            return "Relay's own."
        return f"The owner's, uploaded ({obj.hold_music_seconds:.1f} s)."

    @admin.action(description="Turn forwarding (the ring list) off for the selected numbers")
    def forwarding_off(self, request, queryset):
        forwarding = [number for number in queryset if number.ring_entries]
        for number in forwarding:
            services.number_forwarding_clear(number=number)
        count = len(forwarding)
        self.message_user(
            request, f"Turned forwarding off for {count} number(s).", messages.SUCCESS
        )

    def has_add_permission(self, request):
        return False  # numbers are created through the API, behind the CAPTCHA

    @admin.display(description="call history")
    def history(self, obj):
        # Calls live in the call ledger above this one: reached through the reverse relation
        # it declares (`calls`), never imported.
        return changelist_link(
            obj.calls.model, "calls to this number", number=obj.pk, direction="inbound"
        )

    @admin.display(description="who keeps calling")
    def top_callers(self, obj):
        rows = (
            obj.calls.filter(direction="inbound")
            .values("caller_id")
            .annotate(calls=Count("id"))
            .order_by("-calls", "caller_id")[:TOP_CALLERS]
        )
        if not rows:
            return "No calls yet."
        return format_html(
            "<table>{}</table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{} calls</td></tr>",
                (
                    (
                        changelist_link(
                            obj.calls.model,
                            r["caller_id"],
                            number=obj.pk,
                            direction="inbound",
                            caller_id=r["caller_id"],
                        ),
                        r["calls"],
                    )
                    for r in rows
                ),
            ),
        )

    @admin.action(description="Release the selected numbers back to the inventory")
    def release(self, request, queryset):
        count = 0
        for number in queryset:
            services.number_release(number=number)
            count += 1
        self.message_user(request, f"Released {count} number(s).", messages.SUCCESS)

    # Deleting a number in the admin is releasing it: through the service, so that its calls,
    # voicemail files and counters go with it (the calls are the ledger's, above this app).
    def delete_model(self, request, obj):
        services.number_release(number=obj)

    def delete_queryset(self, request, queryset):
        for number in queryset:
            services.number_release(number=number)


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
    list_display = ("e164", "is_held", "holder", "free_from", "created_at")
    list_filter = (HeldFilter,)
    search_fields = ("e164",)
    readonly_fields = ("created_at", "holder")
    actions = ["quarantine_end"]

    @admin.action(description="End the quarantine of the selected numbers (free them now)")
    def quarantine_end(self, request, queryset):
        ended = services.inventory_quarantine_end(entries=queryset)
        self.message_user(request, f"{ended} number(s) free to take now.")

    list_select_related = ("holding__owner",)

    def get_queryset(self, request):
        held = Number.objects.filter(inventory=OuterRef("pk"))
        return super().get_queryset(request).annotate(held=Exists(held))

    @admin.display(boolean=True, description="held", ordering="held")
    def is_held(self, obj):
        return obj.held

    @admin.display(description="held by")
    def holder(self, obj):
        number = getattr(obj, "holding", None)
        if number is None:
            return "-"
        return format_html("{} ({})", change_link(number), change_link(number.owner))


@admin.register(BlockedCaller)
class BlockedCallerAdmin(admin.ModelAdmin):
    list_display = ("caller_num", "number_link", "created_at")
    search_fields = ("=caller_num", "=number__number", "number__owner__email")
    list_select_related = ("number",)
    raw_id_fields = ("number",)

    def has_add_permission(self, request):
        return False  # blocked from the call history (an action there), so the caller is real

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="number", ordering="number__number")
    def number_link(self, obj):
        return change_link(obj.number, obj.number.number)
