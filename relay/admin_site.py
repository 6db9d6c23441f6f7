import functools
from datetime import timedelta

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count
from django.urls import path
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect

from core.passwords import HASHES_PASSWORDS, PasswordHashingBusy, hashes_passwords_on_post
from relay import admin_signin


def hashes_passwords_on_post_in_service(view):
    """hashes_passwords_on_post for a view whose service takes the hashing slot itself (a
    slot is not re-entrant: the view holding one too would wait for itself): only the mark
    that admits its POSTs as hashing (core.passwords.view_hashes), and a busy queue answered
    with the same 503 in Relay's error shape."""

    @functools.wraps(view)
    def wrapper(self, request, *args, **kwargs):
        try:
            return view(self, request, *args, **kwargs)
        except PasswordHashingBusy as busy:
            return busy.as_response()

    setattr(wrapper, HASHES_PASSWORDS, frozenset({"POST"}))
    return wrapper


class RelayAdminSite(admin.AdminSite):
    """Django admin with the service's state at a glance on the index page."""

    site_header = "Relay administration"
    site_title = "Relay admin"
    index_title = "Service state"
    index_template = "admin/relay_index.html"

    def index(self, request, extra_context=None):
        return super().index(request, {**(extra_context or {}), "relay": service_state()})

    def has_permission(self, request):
        # Staff signed in through the admin's own login, its LoginSession still active, and
        # with a second factor where REQUIRE_STAFF_2FA asks for one (relay.admin_signin).
        return super().has_permission(request) and admin_signin.signed_in(request)

    def get_urls(self):
        return [path("login/code/", self.login_code, name="login_code"), *super().get_urls()]

    # The login form is open to anyone and checks a password; the password change form
    # checks the old one and hashes the new. Both hash in a slot like the API's login. The
    # login is the API's (relay.admin_signin): its limits, its second factor, and its slot,
    # taken by user_login itself, so the view is only marked for admission.
    @method_decorator(csrf_protect)
    @method_decorator(never_cache)
    @login_not_required
    @hashes_passwords_on_post_in_service
    def login(self, request, extra_context=None):
        return admin_signin.login(self, request, extra_context)

    @method_decorator(csrf_protect)
    @method_decorator(never_cache)
    @login_not_required
    def login_code(self, request):
        return admin_signin.login_code(self, request)

    def logout(self, request, extra_context=None):
        if request.method == "POST":  # Django's LogoutView signs out on POST only
            admin_signin.sign_out(request)
        return super().logout(request, extra_context)

    @hashes_passwords_on_post
    def password_change(self, request, extra_context=None):
        response = super().password_change(request, extra_context)
        if request.method == "POST" and response.status_code == 302:  # the password changed
            admin_signin.password_changed(request, request.user)
        return response


def service_state() -> dict:
    """What staff want first: how many users and numbers, and how calls went in 24 hours."""
    from accounts.models import User
    from calls.models import Call
    from calls.states import CallState
    from virtual_numbers.selectors import inventory_counts

    since = timezone.now() - timedelta(hours=24)
    outbound = dict(
        Call.objects.filter(direction="outbound", created_at__gte=since)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    inbound = dict(
        Call.objects.filter(direction="inbound", outcome__isnull=False, created_at__gte=since)
        .values_list("outcome")
        .annotate(n=Count("id"))
        .values_list("outcome", "n")
    )
    failed = list(
        Call.objects.filter(direction="outbound", status=CallState.FAILED, created_at__gte=since)
        .select_related("owner")
        .order_by("-created_at")[:10]
    )
    return {
        "users": User.objects.count(),
        "numbers": inventory_counts(),
        "outbound": [(label, outbound.get(value, 0)) for value, label in CallState.choices],
        "inbound": inbound,
        "failed": failed,
        "failed_total": outbound.get(CallState.FAILED, 0),
    }
