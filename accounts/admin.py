import logging
from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import BaseUserCreationForm, UserChangeForm
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from accounts import selectors, services, twofactor
from accounts.models import DialRefusal, FraudRecord, LoginSession, User
from core.admin_links import ReadOnlyAdmin, change_link, changelist_link
from core.passwords import hashes_passwords_on_post
from core.phone import country_codes_problem, parse_country_codes

logger = logging.getLogger(__name__)


class UserCreationAdminForm(BaseUserCreationForm):
    class Meta:
        model = User
        fields = ("email",)

    def save(self, commit=True):
        # Through the manager, so the user gets an API key like every other user.
        user = User.objects.create_user(
            email=self.cleaned_data["email"],
            password=self.cleaned_data["password1"],
            email_verified=True,  # staff vouch for the address they type
        )
        self.instance = user
        return user

    def save_m2m(self):  # create_user already saved the row; groups are set on the change page
        return None


class UserChangeAdminForm(UserChangeForm):
    class Meta:
        model = User
        fields = (
            "email",
            "email_verified",
            "plan",
            "matrix_id",
            "dial_countries",
            "calls_per_day",
            "call_seconds_per_day",
            "concurrent_calls",
            "is_active",
            "is_staff",
            "is_superuser",
        )

    email = forms.EmailField()
    plan = forms.ChoiceField(help_text="Plans and their limits are defined in settings (PLANS).")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The plans settings define now, and the user's own even if it is no longer one.
        plans = [*settings.PLANS, *([self.instance.plan] if self.instance.plan else [])]
        self.fields["plan"].choices = [(plan, plan) for plan in dict.fromkeys(plans)]

    def clean_email(self):
        return self.cleaned_data["email"].strip().lower()

    def clean_dial_countries(self):
        codes = parse_country_codes(self.cleaned_data["dial_countries"])
        problem = country_codes_problem(codes)
        if problem:
            raise forms.ValidationError(problem)
        return ",".join(dict.fromkeys(codes))


class FraudFlagFilter(admin.SimpleListFilter):
    title = "fraud review"
    parameter_name = "flagged"

    def lookups(self, request, model_admin):
        return [("yes", "Flagged"), ("no", "Not flagged")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(fraud_flagged_at__isnull=self.value() == "no")
        return queryset


class LoginSessionInline(admin.TabularInline):
    model = LoginSession
    extra = 0
    can_delete = False
    fields = ("id", "created_at", "last_seen", "active", "ended_at")
    readonly_fields = fields
    ordering = ("-created_at",)
    max_num = 0
    show_change_link = True


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    form = UserChangeAdminForm
    add_form = UserCreationAdminForm
    ordering = ("-created_at",)
    list_display = (
        "email",
        "plan",
        "matrix_id",
        "is_staff",
        "is_active",
        "fraud_flag",
        "created_at",
    )
    list_filter = (FraudFlagFilter, "plan", "is_staff", "is_active")
    search_fields = ("email",)
    readonly_fields = (
        "id",
        "created_at",
        "last_login",
        "password_state",
        "related",
        "fraud_flagged_at",
        "refusals_last_hour",
        "second_factor",
        "email_pending",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "email",
                    "email_verified",
                    "email_pending",
                    "password_state",
                    "second_factor",
                )
            },
        ),
        ("Profile", {"fields": ("plan", "matrix_id", "created_at", "last_login", "related")}),
        (
            "Dialing and quotas",
            {
                "description": "Blank limits are the plan's. Countries are added to "
                "DIAL_ALLOWED_COUNTRIES for this user only.",
                "fields": (
                    "dial_countries",
                    "calls_per_day",
                    "call_seconds_per_day",
                    "concurrent_calls",
                    "fraud_flagged_at",
                    "refusals_last_hour",
                ),
            },
        ),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)
    filter_horizontal = ("groups",)
    inlines = [LoginSessionInline]
    actions = [
        "end_all_sessions",
        "regenerate_api_keys",
        "clear_fraud_flags",
        "reset_second_factors",
    ]

    @admin.display(description="fraud review", ordering="fraud_flagged_at")
    def fraud_flag(self, obj):
        if obj.fraud_flagged_at is None:
            return ""
        return format_html('<strong style="color:#ba2121">{}</strong>', "flagged")

    @admin.display(description="refused calls in the last hour")
    def refusals_last_hour(self, obj):
        since = timezone.now() - timedelta(hours=1)
        count = obj.dial_refusals.filter(at__gt=since).count()
        return f"{count} (flagged at {settings.FRAUD_FLAG_REFUSALS_PER_HOUR})"

    @admin.action(description="Clear the fraud flag of the selected users")
    def clear_fraud_flags(self, request, queryset):
        flagged = list(queryset.filter(fraud_flagged_at__isnull=False))
        for user in flagged:
            services.user_fraud_flag_clear(user=user)
        self.message_user(request, f"Cleared {len(flagged)} flag(s).", messages.SUCCESS)

    @admin.display(description="password")
    def password_state(self, obj):
        # Never the hash, not even Django's masked summary of it: only whether one is set.
        state = "set" if obj.has_usable_password() else "not set"
        return format_html('{} (<a href="../password/">change</a>)', state)

    @admin.display(description="second factor")
    def second_factor(self, obj):
        # Only whether there is one, never its secret or codes.
        device = getattr(obj, "totp_device", None)
        if device is None:
            return "off"
        if device.confirmed_at is None:
            return "enrolment started, not confirmed"
        left = selectors.recovery_codes_left(user=obj)
        return (
            f"on since {device.confirmed_at:%Y-%m-%d %H:%M} UTC, {left} recovery code(s) left "
            "(the action “Reset the second factor” turns it off)"
        )

    @admin.display(description="related")
    def related(self, obj):
        # Through the reverse relations the apps above declare on the user, so this app
        # needs no import of theirs: the user's numbers, call history and outbound calls.
        relations = (
            (obj.numbers, "numbers", {}),
            (obj.calls, "call history", {"direction": "inbound"}),
            (obj.calls, "outbound calls", {"direction": "outbound"}),
        )
        return format_html_join(
            " &middot; ",
            "{}",
            (
                (changelist_link(rows.model, label, owner=obj.pk, **more),)
                for rows, label, more in relations
            ),
        )

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []  # a new user has no sessions yet

    # Adding a user and setting a password hash one, like registering: in a hashing slot.
    @hashes_passwords_on_post
    def add_view(self, request, form_url="", extra_context=None):
        return super().add_view(request, form_url, extra_context)

    @hashes_passwords_on_post
    def user_change_password(self, request, id, form_url=""):
        response = super().user_change_password(request, id, form_url)
        if request.method == "POST" and response.status_code == 302:  # the password was set
            # Every session of the user ends, as a reset ends them: whoever held the old
            # password is out (staff setting their own here sign in again; the admin's own
            # "Change password" keeps their sign-in).
            user = self.get_object(request, id)
            ended = services.sessions_end_all(user=user)
            logger.info(
                "password of user %s set by staff user %s; %d session(s) ended",
                user.pk,
                request.user.pk,
                ended,
            )
        return response

    @admin.action(description="End all sessions of the selected users")
    def end_all_sessions(self, request, queryset):
        ended = sum(services.sessions_end_all(user=user) for user in queryset)
        self.message_user(request, f"Ended {ended} session(s).", messages.SUCCESS)

    @admin.action(description="Regenerate the API key of the selected users")
    def regenerate_api_keys(self, request, queryset):
        for user in queryset:
            services.user_api_key_regenerate(user=user)
        self.message_user(request, f"Regenerated {queryset.count()} API key(s).", messages.SUCCESS)

    @admin.action(description="Reset the second factor of the selected users")
    def reset_second_factors(self, request, queryset):
        # For a user who lost both the phone and the recovery codes: the password alone logs
        # in again, and the user is mailed. The admin's history records who did it.
        reset = 0
        for user in queryset:
            if twofactor.two_factor_reset(user=user, staff=request.user):
                self.log_change(request, user, "Reset the second factor.")
                reset += 1
        self.message_user(request, f"Reset {reset} second factor(s).", messages.SUCCESS)


@admin.register(LoginSession)
class LoginSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "user_link", "created_at", "last_seen", "active", "ended_at")
    list_filter = ("active",)
    search_fields = ("user__email", "id")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    readonly_fields = ("id", "user", "created_at", "last_seen", "active", "ended_at")
    ordering = ("-created_at",)
    actions = ["end_sessions"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="user", ordering="user__email")
    def user_link(self, obj):
        return change_link(obj.user)

    @admin.action(description="End the selected sessions")
    def end_sessions(self, request, queryset):
        count = 0
        for session in queryset.filter(active=True):
            services.session_end(session=session)
            count += 1
        self.message_user(request, f"Ended {count} session(s).", messages.SUCCESS)


@admin.register(DialRefusal)
class DialRefusalAdmin(ReadOnlyAdmin):
    # What flagged a user: read-only, kept a week (purge_expired).
    list_display = ("at", "user_link", "kind", "reason")
    list_filter = ("kind", "reason")
    search_fields = ("user__email",)
    list_select_related = ("user",)
    ordering = ("-at",)

    @admin.display(description="user", ordering="user__email")
    def user_link(self, obj):
        return change_link(obj.user)


@admin.register(FraudRecord)
class FraudRecordAdmin(ReadOnlyAdmin):
    # What deletion kept of accounts under fraud review: read-only, kept a year. The search
    # box takes an e-mail address and finds its digest; the address itself is not kept.
    list_display = ("deleted_at", "flagged_at", "refusals")
    list_filter = ("deleted_at",)
    search_fields = ("email_digest",)
    search_help_text = "An e-mail address: the records of accounts deleted with it."
    ordering = ("-deleted_at",)

    def get_search_results(self, request, queryset, search_term):
        if not search_term.strip():
            return queryset, False
        return queryset.filter(email_digest=services.email_digest(search_term)), False
